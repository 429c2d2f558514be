//! Decoding of Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`)
//! into JSON, for the built-in kinds kubectl's typed clients send that way (`kubectl create
//! configmap|secret|namespace|serviceaccount`). Answers are always JSON, which those clients
//! accept.
//!
//! The envelope is the `k8s\0` magic followed by a `runtime.Unknown` message (type meta, raw
//! object bytes). Objects are decoded with small field tables; unknown fields are skipped.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};

/// How one protobuf field maps to JSON.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    /// bytes, rendered base64 as in JSON.
    Bytes,
    Int,
    Bool,
    Msg(&'static [Field]),
    RepeatedStr,
    RepeatedMsg(&'static [Field]),
    MapStr,
    MapBytes,
    Time,
}

#[derive(Clone, Copy)]
struct Field {
    num: u64,
    name: &'static str,
    kind: Kind,
}

const fn f(num: u64, name: &'static str, kind: Kind) -> Field {
    Field { num, name, kind }
}

const OWNER_REFERENCE: &[Field] = &[
    f(1, "kind", Kind::Str),
    f(3, "name", Kind::Str),
    f(4, "uid", Kind::Str),
    f(5, "apiVersion", Kind::Str),
    f(6, "controller", Kind::Bool),
    f(7, "blockOwnerDeletion", Kind::Bool),
];

const OBJECT_META: &[Field] = &[
    f(1, "name", Kind::Str),
    f(2, "generateName", Kind::Str),
    f(3, "namespace", Kind::Str),
    f(5, "uid", Kind::Str),
    f(6, "resourceVersion", Kind::Str),
    f(7, "generation", Kind::Int),
    f(8, "creationTimestamp", Kind::Time),
    f(11, "labels", Kind::MapStr),
    f(12, "annotations", Kind::MapStr),
    f(13, "ownerReferences", Kind::RepeatedMsg(OWNER_REFERENCE)),
    f(14, "finalizers", Kind::RepeatedStr),
];

const CONFIG_MAP: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "data", Kind::MapStr),
    f(3, "binaryData", Kind::MapBytes),
    f(4, "immutable", Kind::Bool),
];

const SECRET: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "data", Kind::MapBytes),
    f(3, "type", Kind::Str),
    f(4, "stringData", Kind::MapStr),
    f(5, "immutable", Kind::Bool),
];

const NAMESPACE: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(
        2,
        "spec",
        Kind::Msg(&[f(1, "finalizers", Kind::RepeatedStr)]),
    ),
];

const CSR_CONDITION: &[Field] = &[
    f(1, "type", Kind::Str),
    f(2, "reason", Kind::Str),
    f(3, "message", Kind::Str),
    f(4, "lastUpdateTime", Kind::Time),
    f(5, "lastTransitionTime", Kind::Time),
    f(6, "status", Kind::Str),
];

const CSR: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(
        2,
        "spec",
        Kind::Msg(&[
            f(1, "request", Kind::Bytes),
            f(2, "username", Kind::Str),
            f(3, "uid", Kind::Str),
            f(4, "groups", Kind::RepeatedStr),
            f(5, "usages", Kind::RepeatedStr),
            f(7, "signerName", Kind::Str),
            f(8, "expirationSeconds", Kind::Int),
        ]),
    ),
    f(
        3,
        "status",
        Kind::Msg(&[
            f(1, "conditions", Kind::RepeatedMsg(CSR_CONDITION)),
            f(2, "certificate", Kind::Bytes),
        ]),
    ),
];

const LOCAL_REF: &[Field] = &[f(1, "name", Kind::Str)];

const SERVICE_ACCOUNT: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(3, "imagePullSecrets", Kind::RepeatedMsg(LOCAL_REF)),
    f(4, "automountServiceAccountToken", Kind::Bool),
];

const RESOURCE_ATTRIBUTES: &[Field] = &[
    f(1, "namespace", Kind::Str),
    f(2, "verb", Kind::Str),
    f(3, "group", Kind::Str),
    f(4, "version", Kind::Str),
    f(5, "resource", Kind::Str),
    f(6, "subresource", Kind::Str),
    f(7, "name", Kind::Str),
];

const NON_RESOURCE_ATTRIBUTES: &[Field] = &[f(1, "path", Kind::Str), f(2, "verb", Kind::Str)];

const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(
        2,
        "spec",
        Kind::Msg(&[
            f(1, "resourceAttributes", Kind::Msg(RESOURCE_ATTRIBUTES)),
            f(
                2,
                "nonResourceAttributes",
                Kind::Msg(NON_RESOURCE_ATTRIBUTES),
            ),
        ]),
    ),
];

const SUBJECT_ACCESS_REVIEW: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(
        2,
        "spec",
        Kind::Msg(&[
            f(1, "resourceAttributes", Kind::Msg(RESOURCE_ATTRIBUTES)),
            f(
                2,
                "nonResourceAttributes",
                Kind::Msg(NON_RESOURCE_ATTRIBUTES),
            ),
            f(3, "user", Kind::Str),
            f(4, "groups", Kind::RepeatedStr),
            f(6, "uid", Kind::Str),
        ]),
    ),
];

const POLICY_RULE: &[Field] = &[
    f(1, "verbs", Kind::RepeatedStr),
    f(2, "apiGroups", Kind::RepeatedStr),
    f(3, "resources", Kind::RepeatedStr),
    f(4, "resourceNames", Kind::RepeatedStr),
    f(5, "nonResourceURLs", Kind::RepeatedStr),
];

const ROLE: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "rules", Kind::RepeatedMsg(POLICY_RULE)),
];

const ROLE_BINDING: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(
        2,
        "subjects",
        Kind::RepeatedMsg(&[
            f(1, "kind", Kind::Str),
            f(2, "apiGroup", Kind::Str),
            f(3, "name", Kind::Str),
            f(4, "namespace", Kind::Str),
        ]),
    ),
    f(
        3,
        "roleRef",
        Kind::Msg(&[
            f(1, "apiGroup", Kind::Str),
            f(2, "kind", Kind::Str),
            f(3, "name", Kind::Str),
        ]),
    ),
];

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

fn table(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    match (api_version, kind) {
        ("v1", "ConfigMap") => Some(CONFIG_MAP),
        ("v1", "Secret") => Some(SECRET),
        ("v1", "Namespace") => Some(NAMESPACE),
        ("v1", "ServiceAccount") => Some(SERVICE_ACCOUNT),
        ("certificates.k8s.io/v1", "CertificateSigningRequest") => Some(CSR),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => Some(SELF_SUBJECT_ACCESS_REVIEW),
        ("authorization.k8s.io/v1", "SubjectAccessReview") => Some(SUBJECT_ACCESS_REVIEW),
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => Some(ROLE),
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => {
            Some(ROLE_BINDING)
        }
        _ => None,
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn malformed() -> ApiError {
    ApiError::BadRequest("malformed protobuf body".into())
}

impl<'a> Reader<'a> {
    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn varint(&mut self) -> ApiResult<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or_else(malformed)?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(malformed())
    }

    fn bytes(&mut self) -> ApiResult<&'a [u8]> {
        let len = usize::try_from(self.varint()?).map_err(|_| malformed())?;
        let end = self.pos.checked_add(len).ok_or_else(malformed)?;
        let s = self.buf.get(self.pos..end).ok_or_else(malformed)?;
        self.pos = end;
        Ok(s)
    }

    /// Reads a key; returns (field number, wire type).
    fn key(&mut self) -> ApiResult<(u64, u8)> {
        let k = self.varint()?;
        Ok((k >> 3, (k & 7) as u8))
    }

    fn skip(&mut self, wire: u8) -> ApiResult<()> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            _ => Err(malformed()),
        }
    }

    fn advance(&mut self, n: usize) -> ApiResult<()> {
        if self.pos + n > self.buf.len() {
            return Err(malformed());
        }
        self.pos += n;
        Ok(())
    }
}

fn string(b: &[u8]) -> ApiResult<Value> {
    std::str::from_utf8(b)
        .map(|s| Value::String(s.to_string()))
        .map_err(|_| malformed())
}

fn map_entry(b: &[u8], bytes_value: bool) -> ApiResult<(String, Value)> {
    let mut r = Reader { buf: b, pos: 0 };
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    while !r.done() {
        let (num, wire) = r.key()?;
        match (num, wire) {
            (1, 2) => k = string(r.bytes()?)?.as_str().unwrap_or("").to_string(),
            (2, 2) if bytes_value => v = json!(STANDARD.encode(r.bytes()?)),
            (2, 2) => v = string(r.bytes()?)?,
            (_, w) => r.skip(w)?,
        }
    }
    Ok((k, v))
}

fn time(b: &[u8]) -> ApiResult<Value> {
    let mut r = Reader { buf: b, pos: 0 };
    let mut secs = 0i64;
    while !r.done() {
        match r.key()? {
            (1, 0) => secs = r.varint()? as i64,
            (_, w) => r.skip(w)?,
        }
    }
    Ok(jiff::Timestamp::from_second(secs)
        .map(|t| json!(t.to_string()))
        .unwrap_or(Value::Null))
}

fn message(b: &[u8], fields: &[Field]) -> ApiResult<Value> {
    let mut r = Reader { buf: b, pos: 0 };
    let mut out = Map::new();
    while !r.done() {
        let (num, wire) = r.key()?;
        let Some(field) = fields.iter().find(|f| f.num == num) else {
            r.skip(wire)?;
            continue;
        };
        let want = match field.kind {
            Kind::Int | Kind::Bool => 0,
            _ => 2,
        };
        if wire != want {
            return Err(malformed());
        }
        match field.kind {
            Kind::Str => {
                // Go writes unset strings as empty ones; JSON omits them.
                let v = string(r.bytes()?)?;
                if v.as_str().is_some_and(|s| !s.is_empty()) {
                    out.insert(field.name.into(), v);
                }
            }
            Kind::Bytes => {
                out.insert(field.name.into(), json!(STANDARD.encode(r.bytes()?)));
            }
            Kind::Int => {
                out.insert(field.name.into(), json!(r.varint()? as i64));
            }
            Kind::Bool => {
                out.insert(field.name.into(), json!(r.varint()? != 0));
            }
            Kind::Time => {
                let b = r.bytes()?;
                if !b.is_empty() {
                    out.insert(field.name.into(), time(b)?);
                }
            }
            Kind::Msg(sub) => {
                out.insert(field.name.into(), message(r.bytes()?, sub)?);
            }
            Kind::RepeatedStr => {
                let v = string(r.bytes()?)?;
                push(&mut out, field.name, v);
            }
            Kind::RepeatedMsg(sub) => {
                let v = message(r.bytes()?, sub)?;
                push(&mut out, field.name, v);
            }
            Kind::MapStr | Kind::MapBytes => {
                let (k, v) = map_entry(r.bytes()?, matches!(field.kind, Kind::MapBytes))?;
                let m = out
                    .entry(field.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(m) = m.as_object_mut() {
                    m.insert(k, v);
                }
            }
        }
    }
    Ok(Value::Object(out))
}

fn push(out: &mut Map<String, Value>, name: &str, v: Value) {
    let list = out.entry(name).or_insert_with(|| Value::Array(Vec::new()));
    if let Some(a) = list.as_array_mut() {
        a.push(v);
    }
}

/// Decodes a protobuf-encoded object into JSON (with apiVersion and kind).
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let unsupported = || ApiError::UnsupportedMediaType("application/json".into());
    let rest = body.strip_prefix(b"k8s\0").ok_or_else(malformed)?;
    let mut r = Reader { buf: rest, pos: 0 };
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    while !r.done() {
        match r.key()? {
            (1, 2) => {
                let tm = message(
                    r.bytes()?,
                    &[f(1, "apiVersion", Kind::Str), f(2, "kind", Kind::Str)],
                )?;
                api_version = tm["apiVersion"].as_str().unwrap_or("").to_string();
                kind = tm["kind"].as_str().unwrap_or("").to_string();
            }
            (2, 2) => raw = r.bytes()?,
            (_, w) => r.skip(w)?,
        }
    }
    let fields = table(&api_version, &kind).ok_or_else(unsupported)?;
    let mut obj = message(raw, fields)?;
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), json!(api_version));
        o.insert("kind".into(), json!(kind));
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![((num << 3) | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn decodes_a_config_map_envelope() {
        let meta = [
            field(1, b"cfg"),
            field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ]
        .concat();
        let cm = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        ]
        .concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &tm), field(2, &cm)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "labels": {"app": "web"}}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn truncated_or_unknown_bodies_are_client_errors() {
        assert_eq!(decode(b"k8s\0\x0a\x09v1").err().unwrap().code(), 400);
        assert_eq!(decode(b"nope").err().unwrap().code(), 400);
        let tm = [field(1, b"v1"), field(2, b"Pod")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &tm), field(2, b"")].concat();
        assert_eq!(decode(&body).err().unwrap().code(), 415);
    }
}

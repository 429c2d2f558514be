//! The `pod-template-hash` kube-controller-manager names a Deployment's ReplicaSets by.
//!
//! kube-controller-manager hashes (FNV-32a) the printed form of the Go `v1.PodTemplateSpec` it
//! decoded from the stored Deployment: go-spew's `%#v` dump as `dump.ForHash` configures it
//! (methods disabled, map keys sorted, no pointer addresses). That dump shows every field of
//! every struct in Go declaration order, with its Go name and Go type, whether the JSON has it
//! or not: `(v1.PodTemplateSpec){ObjectMeta:(v1.ObjectMeta){Name:(string) ...`. Nil pointers
//! print as `(*T)<nil>`, empty slices and maps as `<nil>` (the controller reads objects as
//! protobuf, which keeps no empty list or map), strings unquoted. The Go shapes come from
//! `pod_template.types` (generated from Kubernetes' Go sources by
//! `tools/pod_template_types.py`), read once. The Deployment's `status.collisionCount`, when
//! set, is hashed after the dump as 8 bytes (its uint32, little-endian), and the hash's
//! decimal digits are spelled in kube's safe alphabet.
//!
//! Types that encode themselves print their Go internals, modelled here: `resource.Quantity`
//! (the scaled integer or decimal, the string the parser kept, the format: see
//! [`quantity`]), `intstr.IntOrString`, and a zero `metav1.Time`.
//!
//! Not reproduced exactly (each still hashes deterministically, so a template with them gets a
//! stable name that differs from a real cluster's):
//! - a set `metav1.Time` in the template's metadata (`creationTimestamp`, `deletionTimestamp`,
//!   `managedFields[].time`): kube-controller-manager's copy carries its local time zone,
//!   whose Go internals depend on its host;
//! - `managedFields[].fieldsV1` in the template's metadata: its raw bytes are kube-apiserver's
//!   JSON text, which this dump approximates with compact JSON;
//! - quantities whose decimal form needs more than 127 bits, and JSON numbers written in
//!   exponent or fraction form where a quantity is expected (the dump uses serde's digits).

pub mod quantity;

use std::collections::HashMap;
use std::fmt::Write;
use std::sync::LazyLock;

use serde_json::Value;

use crate::meta::parse_time;
use quantity::{Amount, Quantity};

/// kube's `SafeEncodeString` alphabet: no vowels, no look-alike digits.
const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The Go shape of `v1.PodTemplateSpec`, read once.
static SHAPES: LazyLock<Shapes> = LazyLock::new(|| {
    Shapes::parse(include_str!("pod_template.types"))
        .unwrap_or_else(|e| panic!("pod_template.types (generated): {e}"))
});

/// The `pod-template-hash` of a Deployment's stored `spec.template` and its
/// `status.collisionCount`.
pub fn template_hash(template: &Value, collision_count: Option<i64>) -> String {
    let mut hasher = Fnv(0x811c_9dc5);
    dump(&mut hasher, template);
    if let Some(n) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&(n as u32).to_le_bytes());
        hasher.eat(&bytes);
    }
    hasher
        .0
        .to_string()
        .bytes()
        .map(|b| SAFE[usize::from(b) % SAFE.len()] as char)
        .collect()
}

/// go-spew's `%#v` dump of a template as kube-controller-manager's Go value of it.
fn dump(out: &mut impl Write, template: &Value) {
    let shapes = &*SHAPES;
    shapes.print(out, &shapes.root, Some(template), true);
}

/// FNV-32a, written to as text.
struct Fnv(u32);

impl Fnv {
    fn eat(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u32::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0193);
        }
    }
}

impl Write for Fnv {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.eat(s.as_bytes());
        Ok(())
    }
}

/// A Go type: the name Go's reflection prints for it, and what it is.
#[derive(Debug)]
struct Ty {
    name: String,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Bool,
    Int,
    String,
    Pointer(Box<Ty>),
    Slice(Box<Ty>),
    /// A map with string keys.
    Map(Box<Ty>),
    Struct(usize),
    Time,
    FieldsV1,
    Quantity,
    IntOrString,
}

#[derive(Debug)]
struct Field {
    name: &'static str,
    key: Key,
    ty: Ty,
}

#[derive(Debug)]
enum Key {
    Json(&'static str),
    /// The field's own fields are the enclosing JSON object's.
    Inline,
    /// Not in JSON: always its zero value.
    Absent,
}

struct Shapes {
    structs: Vec<Vec<Field>>,
    root: Ty,
}

/// A declaration of the data file: a struct (its index and field lines), a named type, or a
/// type that encodes itself.
enum Decl<'a> {
    Struct(usize, &'a str, Vec<&'a str>),
    Named(&'a str, &'a str),
    Special(&'a str),
}

impl Shapes {
    fn parse(text: &'static str) -> Result<Shapes, String> {
        let mut decls: HashMap<&str, Decl> = HashMap::new();
        let mut current: Option<&str> = None;
        let mut count = 0;
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            if let Some(field) = line.strip_prefix("  ") {
                match current.and_then(|id| decls.get_mut(id)) {
                    Some(Decl::Struct(_, _, fields)) => fields.push(field),
                    _ => return Err(format!("a field outside a struct: {line:?}")),
                }
                continue;
            }
            let words: Vec<&str> = line.split(' ').collect();
            let decl = match words[..] {
                ["struct", id, name] => {
                    count += 1;
                    current = Some(id);
                    (id, Decl::Struct(count - 1, name, Vec::new()))
                }
                ["named", id, name, under] => (id, Decl::Named(name, under)),
                ["special", id, name] => (id, Decl::Special(name)),
                _ => return Err(format!("a line not understood: {line:?}")),
            };
            if !matches!(decl.1, Decl::Struct(..)) {
                current = None;
            }
            decls.insert(decl.0, decl.1);
        }
        let mut structs: Vec<Vec<Field>> = (0..count).map(|_| Vec::new()).collect();
        for decl in decls.values() {
            let Decl::Struct(index, _, lines) = decl else {
                continue;
            };
            for line in lines {
                let [name, key, ty] = line.split(' ').collect::<Vec<_>>()[..] else {
                    return Err(format!("a field line not understood: {line:?}"));
                };
                let key = match key {
                    "-inline" => Key::Inline,
                    "-none" => Key::Absent,
                    key => Key::Json(key),
                };
                let ty = resolve(&decls, ty)?;
                if matches!(key, Key::Inline) && !matches!(ty.kind, Kind::Struct(_)) {
                    return Err(format!("{name}: only structs are inlined"));
                }
                structs[*index].push(Field { name, key, ty });
            }
        }
        let root = resolve(&decls, "io.k8s.api.core.v1.PodTemplateSpec")?;
        Ok(Shapes { structs, root })
    }

    /// Prints `v` (`None`: absent or null) as a value of `ty`; `typed`: with its type first,
    /// as go-spew does except for the elements of slices and maps.
    fn print(&self, out: &mut impl Write, ty: &Ty, v: Option<&Value>, typed: bool) {
        let v = v.filter(|v| !v.is_null());
        if let Kind::Pointer(inner) = &ty.kind {
            // A pointer's type names its target: `(*T)`, or `<*>` where types are not shown.
            let _ = match (v, typed) {
                (None, true) => write!(out, "({})<nil>", ty.name),
                (None, false) => out.write_str("<nil>"),
                (Some(_), true) => write!(out, "({})", ty.name),
                (Some(_), false) => out.write_str("<*>"),
            };
            if v.is_some() {
                self.print(out, inner, v, false);
            }
            return;
        }
        if typed {
            let _ = write!(out, "({})", ty.name);
        }
        let _ = match &ty.kind {
            Kind::Pointer(_) => Ok(()), // printed above
            Kind::Bool => write!(out, "{}", v.and_then(Value::as_bool).unwrap_or(false)),
            Kind::Int => write!(out, "{}", v.and_then(Value::as_i64).unwrap_or(0)),
            Kind::String => out.write_str(v.and_then(Value::as_str).unwrap_or("")),
            Kind::Slice(elem) => match v.and_then(Value::as_array).filter(|a| !a.is_empty()) {
                None => out.write_str("<nil>"),
                Some(items) => {
                    let _ = out.write_str("[");
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            let _ = out.write_str(" ");
                        }
                        self.print(out, elem, Some(item), false);
                    }
                    out.write_str("]")
                }
            },
            Kind::Map(value) => match v.and_then(Value::as_object).filter(|m| !m.is_empty()) {
                None => out.write_str("<nil>"),
                Some(map) => {
                    let mut entries: Vec<_> = map.iter().collect();
                    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                    let _ = out.write_str("map[");
                    for (i, (key, item)) in entries.into_iter().enumerate() {
                        let _ = write!(out, "{}{key}:", if i > 0 { " " } else { "" });
                        self.print(out, value, Some(item), false);
                    }
                    out.write_str("]")
                }
            },
            Kind::Struct(index) => {
                let _ = out.write_str("{");
                for (i, field) in self.structs[*index].iter().enumerate() {
                    let _ = write!(out, "{}{}:", if i > 0 { " " } else { "" }, field.name);
                    let value = match field.key {
                        Key::Json(key) => v.and_then(|v| v.get(key)),
                        Key::Inline => v,
                        Key::Absent => None,
                    };
                    self.print(out, &field.ty, value, true);
                }
                out.write_str("}")
            }
            Kind::Time => print_time(out, v),
            Kind::FieldsV1 => {
                let raw = v.map(Value::to_string).unwrap_or_default();
                let _ = out.write_str("{Raw:([]uint8)");
                if raw.is_empty() {
                    let _ = out.write_str("<nil>");
                } else {
                    let bytes: Vec<String> = raw.bytes().map(|b| b.to_string()).collect();
                    let _ = write!(out, "[{}]", bytes.join(" "));
                }
                out.write_str("}")
            }
            Kind::IntOrString => {
                let (kind, int, string) = match v {
                    Some(Value::String(s)) => (1, 0, s.as_str()),
                    Some(n) => (0, n.as_i64().unwrap_or(0), ""),
                    None => (0, 0, ""),
                };
                write!(
                    out,
                    "{{Type:(intstr.Type){kind} IntVal:(int32){int} StrVal:(string){string}}}"
                )
            }
            Kind::Quantity => {
                // A quantity field left out is stored (and read back) as "0".
                let input = match v {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => "0".to_string(),
                };
                print_quantity(out, &input)
            }
        };
    }
}

/// A type expression of the data file (`*T`, `[]T`, `{K}V`, a Go builtin or a declared id).
fn resolve(decls: &HashMap<&str, Decl>, expr: &str) -> Result<Ty, String> {
    if let Some(inner) = expr.strip_prefix('*') {
        let inner = resolve(decls, inner)?;
        return Ok(Ty {
            name: format!("*{}", inner.name),
            kind: Kind::Pointer(Box::new(inner)),
        });
    }
    // go-spew leaves a nil pointer inside a slice or map hiding the next value's type; no
    // template type has such pointers, and none is modelled.
    let no_pointer = |t: Ty| match t.kind {
        Kind::Pointer(_) => Err(format!("{expr}: pointers in slices and maps")),
        _ => Ok(Box::new(t)),
    };
    if let Some(elem) = expr.strip_prefix("[]") {
        let elem = no_pointer(resolve(decls, elem)?)?;
        return Ok(Ty {
            name: format!("[]{}", elem.name),
            kind: Kind::Slice(elem),
        });
    }
    if let Some((key, value)) = expr.strip_prefix('{').and_then(|e| e.split_once('}')) {
        let key = resolve(decls, key)?;
        if !matches!(key.kind, Kind::String) {
            return Err(format!("{expr}: only maps with string keys"));
        }
        let value = no_pointer(resolve(decls, value)?)?;
        return Ok(Ty {
            name: format!("map[{}]{}", key.name, value.name),
            kind: Kind::Map(value),
        });
    }
    let builtin = |kind| {
        Ok(Ty {
            name: expr.to_string(),
            kind,
        })
    };
    match expr {
        "bool" => return builtin(Kind::Bool),
        "int32" | "int64" => return builtin(Kind::Int),
        "string" => return builtin(Kind::String),
        _ => {}
    }
    match decls.get(expr) {
        Some(Decl::Struct(index, name, _)) => Ok(Ty {
            name: name.to_string(),
            kind: Kind::Struct(*index),
        }),
        Some(Decl::Named(name, under)) => Ok(Ty {
            name: name.to_string(),
            kind: resolve(decls, under)?.kind,
        }),
        Some(Decl::Special(name)) => {
            let kind = match *name {
                "v1.Time" => Kind::Time,
                "v1.FieldsV1" => Kind::FieldsV1,
                "resource.Quantity" => Kind::Quantity,
                "intstr.IntOrString" => Kind::IntOrString,
                other => return Err(format!("{other}: a special type not modelled")),
            };
            Ok(Ty {
                name: name.to_string(),
                kind,
            })
        }
        None => Err(format!("{expr}: not declared")),
    }
}

/// A `metav1.Time`: a `time.Time` (wall clock bits, seconds since year 1, location).
fn print_time(out: &mut impl Write, v: Option<&Value>) -> std::fmt::Result {
    // Seconds from year 1 to 1970, as Go's time counts them.
    const UNIX_TO_INTERNAL: i64 = 62_135_596_800;
    let (wall, ext) = match v.and_then(Value::as_str).and_then(parse_time) {
        Some(seconds) => (0, seconds + UNIX_TO_INTERNAL),
        None => (0, 0),
    };
    write!(
        out,
        "{{Time:(time.Time){{wall:(uint64){wall} ext:(int64){ext} loc:(*time.Location)<nil>}}}}"
    )
}

/// A `resource.Quantity` as kube-controller-manager holds one written as `input`.
fn print_quantity(out: &mut impl Write, input: &str) -> std::fmt::Result {
    let q = quantity::as_controller_sees(input).unwrap_or(Quantity {
        amount: Amount::Int { value: 0, scale: 0 },
        kept: input.to_string(),
        format: quantity::Format::DecimalSI,
    });
    let (value, scale) = match q.amount {
        Amount::Int { value, scale } => (value, scale),
        Amount::Dec { .. } => (0, 0),
    };
    write!(
        out,
        "{{i:(resource.int64Amount){{value:(int64){value} scale:(resource.Scale){scale}}} \
         d:(resource.infDecAmount){{Dec:(*inf.Dec)"
    )?;
    match q.amount {
        Amount::Int { .. } => out.write_str("<nil>")?,
        Amount::Dec { unscaled, scale } => {
            // big.Int: a sign and the magnitude's 64-bit words, least significant first.
            let magnitude = unscaled.unsigned_abs();
            let low = magnitude as u64;
            let high = (magnitude >> 64) as u64;
            let words = match (high, low) {
                (0, 0) => "<nil>".to_string(),
                (0, low) => format!("[{low}]"),
                (high, low) => format!("[{low} {high}]"),
            };
            write!(
                out,
                "{{unscaled:(big.Int){{neg:(bool){} abs:(big.nat){words}}} scale:(inf.Scale){scale}}}",
                unscaled < 0
            )?;
        }
    }
    write!(
        out,
        "}} s:(string){} Format:(resource.Format){}}}",
        q.kept,
        q.format.as_str()
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn dumped(template: &Value) -> String {
        let mut s = String::new();
        dump(&mut s, template);
        s
    }

    /// kube-apiserver v1.36's stored template of scenario 04's Deployments (`doomed`,
    /// `foreground`), and the ReplicaSet kube-controller-manager v1.36 made for it:
    /// `doomed-6df898dfbd` (tests/k8s-golden/04-delete-responses.json).
    #[test]
    fn the_hash_is_kube_controller_managers_for_a_recorded_template() {
        let template = json!({
            "metadata": {"labels": {"app": "doomed"}},
            "spec": {
                "containers": [{
                    "name": "c",
                    "image": "registry.example/none:1",
                    "resources": {},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent"
                }],
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "dnsPolicy": "ClusterFirst",
                "automountServiceAccountToken": false,
                "securityContext": {},
                "schedulerName": "default-scheduler"
            }
        });
        assert_eq!(template_hash(&template, None), "6df898dfbd");
        // Key order and explicit nulls or empty lists do not matter: the Go value is the same.
        let mut reordered = template.clone();
        reordered["spec"]["volumes"] = json!([]);
        reordered["metadata"]["creationTimestamp"] = Value::Null;
        assert_eq!(template_hash(&reordered, None), "6df898dfbd");
        // The collision count changes it, and it is spelled in kube's safe alphabet.
        let other = template_hash(&template, Some(1));
        assert_ne!(other, "6df898dfbd");
        assert!(other.bytes().all(|b| SAFE.contains(&b)), "{other}");
    }

    #[test]
    fn the_dump_is_go_spews_form_of_the_go_struct() {
        let d = dumped(&json!({
            "metadata": {"labels": {"b": "2", "a": "1"}},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}
        }));
        assert!(
            d.starts_with(
                "(v1.PodTemplateSpec){ObjectMeta:(v1.ObjectMeta){Name:(string) GenerateName:(string) \
                 Namespace:(string) SelfLink:(string) UID:(types.UID) ResourceVersion:(string) \
                 Generation:(int64)0 CreationTimestamp:(v1.Time){Time:(time.Time){wall:(uint64)0 \
                 ext:(int64)0 loc:(*time.Location)<nil>}} DeletionTimestamp:(*v1.Time)<nil> \
                 DeletionGracePeriodSeconds:(*int64)<nil> Labels:(map[string]string)map[a:1 b:2] \
                 Annotations:(map[string]string)<nil> OwnerReferences:([]v1.OwnerReference)<nil> "
            ),
            "{d}"
        );
        assert!(
            d.contains(
                "Containers:([]v1.Container)[{Name:(string)c Image:(string) Command:([]string)<nil> \
                 Args:([]string)<nil> WorkingDir:(string) Ports:([]v1.ContainerPort)[{Name:(string) \
                 HostPort:(int32)0 ContainerPort:(int32)80 Protocol:(v1.Protocol) HostIP:(string)}] "
            ),
            "{d}"
        );
    }

    #[test]
    fn self_encoding_types_print_their_go_internals() {
        let d = dumped(&json!({"spec": {"containers": [{
            "resources": {"limits": {"memory": "512Mi"}, "requests": {"cpu": "100m"}},
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}},
            "readinessProbe": {"tcpSocket": {"port": 8080}}
        }]}}));
        assert!(
            d.contains(
                "Limits:(v1.ResourceList)map[memory:{i:(resource.int64Amount){value:(int64)536870912 \
                 scale:(resource.Scale)0} d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string) \
                 Format:(resource.Format)BinarySI}] Requests:(v1.ResourceList)map[cpu:{i:\
                 (resource.int64Amount){value:(int64)100 scale:(resource.Scale)-3} \
                 d:(resource.infDecAmount){Dec:(*inf.Dec)<nil>} s:(string)100m \
                 Format:(resource.Format)DecimalSI}]"
            ),
            "{d}"
        );
        assert!(
            d.contains(
                "HTTPGet:(*v1.HTTPGetAction){Path:(string)/healthz Port:(intstr.IntOrString)\
                 {Type:(intstr.Type)1 IntVal:(int32)0 StrVal:(string)metrics} Host:(string)"
            ),
            "{d}"
        );
        assert!(
            d.contains(
                "Port:(intstr.IntOrString){Type:(intstr.Type)0 IntVal:(int32)8080 StrVal:(string)}"
            ),
            "{d}"
        );
        let big = dumped(&json!({"spec": {"overhead": {"memory": "1Pi"}}}));
        assert!(
            big.contains(
                "d:(resource.infDecAmount){Dec:(*inf.Dec){unscaled:(big.Int){neg:(bool)false \
                 abs:(big.nat)[2882303761517117440 61035]} scale:(inf.Scale)9}} s:(string) \
                 Format:(resource.Format)BinarySI"
            ),
            "{big}"
        );
    }

    #[test]
    fn the_generated_shapes_are_read() {
        let shapes = Shapes::parse(include_str!("pod_template.types")).unwrap();
        assert_eq!(shapes.root.name, "v1.PodTemplateSpec");
        assert!(shapes.structs.len() > 100);
    }
}

//! Resource operations: get, list, create, update, patch, delete and deletecollection on one
//! resource, with dry-run, selectors, pagination, Table output and field managers.
//!
//! This module turns a routed request into store writes using the rules in
//! [`crate::objects`] and [`crate::patch`]; it does not parse HTTP (see [`crate::http`]) and
//! does not stream watches (see [`crate::watch`]).

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::admission::{Admission, Attempt, Operation};
use crate::conversion::Converters;
use crate::error::{ApiError, ApiResult};
use crate::fields::decode::Decoded;
use crate::meta::{ObjectMeta, now_rfc3339};
use crate::objects::{
    self, decide_delete, decide_update, prepare_create, prepare_update, present, settle_update,
    subject,
};
use crate::patch::{self, PatchType};
use crate::pod_admission;
use crate::registry::Registry;
use crate::resource::{DeleteOptions, DeleteOutcome, Part, PodAdmission, ResourceInfo};
use crate::selectors::{FieldSelector, LabelReq, LabelSelector};
use crate::storage::{self, Indexed, Lookup, Store, WriteError, WriteOp};
use crate::strategy::apiextensions;
use crate::table::{self, IncludeObject};
use crate::writes::{self, FieldValidation};

pub use crate::request_info::Query;
pub use crate::user::UserInfo;

/// Where CRDs are stored.
const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// The shared state every request works on.
pub struct ApiServer {
    pub registry: Arc<Registry>,
    pub store: Arc<Store>,
    /// The embedder's admission plugins and the RBAC policy they consult.
    pub admission: Admission,
    /// The embedder's converters between the versions of CRDs with webhook conversion.
    pub conversions: Converters,
}

/// A routed resource request.
#[derive(Debug, Clone)]
pub struct Target {
    pub info: Arc<ResourceInfo>,
    /// Empty for cluster-scoped resources and all-namespace lists.
    pub namespace: String,
    pub name: Option<String>,
    pub part: Part,
}

impl Target {
    pub fn key(&self) -> String {
        self.info.storage_key()
    }
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
    /// The namespace the target's objects are stored under, None for every namespace:
    /// cluster-scoped objects are stored under "", which lets a name selector pick by key.
    pub fn stored_namespace(&self) -> Option<&str> {
        match (self.info.namespaced, self.namespace.as_str()) {
            (false, _) => Some(""),
            (true, "") => None,
            (true, ns) => Some(ns),
        }
    }
}

/// Request options common to every write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    pub force: bool,
    /// What to do with undeclared fields and duplicate JSON keys (`fieldValidation`).
    pub validation: FieldValidation,
    /// Manager name derived from the User-Agent when none is given.
    pub user_agent_manager: String,
    /// Who asks (recorded as the requester of CertificateSigningRequests, and shown to
    /// admission plugins); None for the server's own writes, which are not admitted.
    pub user: Option<UserInfo>,
}

impl WriteOptions {
    /// Reads `dryRun`, `fieldManager` and `force` from the query.
    pub fn from_query(q: &Query, user_agent: &str, user: &UserInfo) -> ApiResult<Self> {
        let dry_run = match q.all("dryRun").as_slice() {
            [] => false,
            vals if vals.iter().all(|v| *v == "All") => true,
            vals => {
                return Err(ApiError::BadRequest(format!(
                    "dryRun: Unsupported value: {:?}: supported values: \"All\"",
                    vals.iter().find(|v| **v != "All").copied().unwrap_or("")
                )));
            }
        };
        let field_manager = q.get("fieldManager").map(str::to_string);
        if let Some(m) = &field_manager
            && m.len() > 128
        {
            return Err(ApiError::BadRequest(
                "fieldManager: Too long: may not be more than 128 bytes".into(),
            ));
        }
        let force = match q.get("force") {
            None | Some("false") | Some("0") => false,
            Some("true") | Some("1") => true,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "invalid value for force: {other:?}"
                )));
            }
        };
        let validation = FieldValidation::parse(q.get("fieldValidation"))?;
        let ua = user_agent.split('/').next().unwrap_or("").trim();
        Ok(WriteOptions {
            dry_run,
            field_manager,
            force,
            validation,
            user: Some(user.clone()),
            user_agent_manager: if ua.is_empty() {
                "unknown".into()
            } else {
                ua.into()
            },
        })
    }

    /// The field manager writes are recorded under: `fieldManager`, else the User-Agent's name.
    pub fn manager(&self) -> &str {
        self.field_manager
            .as_deref()
            .unwrap_or(&self.user_agent_manager)
    }
}

/// What a handler answers.
pub struct Answer {
    pub code: u16,
    pub body: Reply,
    /// `Warning` headers (`299 - "..."`): what decoding, the strategy and admission found for
    /// the client.
    pub warnings: Vec<String>,
}

/// What an answer carries.
pub enum Reply {
    /// An object, to be serialised.
    Object(Value),
    /// JSON ready to go out: objects served as they are stored are never decoded.
    Json(Bytes),
}

impl Answer {
    fn ok(body: Value) -> Self {
        Answer {
            code: 200,
            body: Reply::Object(body),
            warnings: Vec::new(),
        }
    }

    fn json(body: Bytes) -> Self {
        Answer {
            code: 200,
            body: Reply::Json(body),
            warnings: Vec::new(),
        }
    }

    /// The answer with these warnings.
    fn warned(mut self, warnings: Vec<String>) -> Self {
        self.warnings.extend(warnings);
        self
    }

    /// The answer's object.
    pub fn into_object(self) -> Value {
        match self.body {
            Reply::Object(object) => object,
            Reply::Json(raw) => storage::decode(&raw),
        }
    }
}

/// Selectors of a list, watch or deletecollection.
pub struct Filter {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn from_query(info: &ResourceInfo, q: &Query) -> ApiResult<Self> {
        let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or(""))
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let mut supported = vec![
            "metadata.name".to_string(),
            "metadata.namespace".to_string(),
        ];
        supported.extend(
            info.strategy
                .field_selectors()
                .iter()
                .map(|f| f.to_string()),
        );
        let mut fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or(""), &supported)
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        // Selectors are matched against stored objects.
        for req in &mut fields.0 {
            req.path = info.strategy.stored_field(&req.path).into_owned();
        }
        Ok(Filter { labels, fields })
    }
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
    /// Whether an object named `name` in `namespace` matches, when that alone decides it: no
    /// label selector, and fields only `metadata.name` and `metadata.namespace`.
    pub fn matches_name(&self, namespace: &str, name: &str) -> Option<bool> {
        if !self.labels.is_empty() {
            return None;
        }
        self.fields.0.iter().try_fold(true, |all, req| {
            let value = match req.path.as_str() {
                "metadata.name" => name,
                "metadata.namespace" => namespace,
                _ => return None,
            };
            Some(all && ((value == req.value) != req.negate))
        })
    }
    /// Whether every object matches.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.0.is_empty()
    }
    /// The equality requirements the store can answer from its indexes.
    pub fn lookups(&self) -> Vec<Lookup> {
        let labels = self.labels.0.iter().filter_map(|req| match req {
            LabelReq::Eq(key, value) => Some(Lookup {
                on: Indexed::Label(key.clone()),
                values: vec![value.clone()],
            }),
            LabelReq::In(key, values) => Some(Lookup {
                on: Indexed::Label(key.clone()),
                values: values.clone(),
            }),
            _ => None,
        });
        let fields = self
            .fields
            .0
            .iter()
            .filter(|req| !req.negate)
            .map(|req| Lookup {
                on: Indexed::Field(req.path.clone()),
                values: vec![req.value.clone()],
            });
        labels.chain(fields).collect()
    }
}

impl Render {
    /// Whether objects are answered whole, as served (no Table, no metadata alone).
    fn whole_objects(&self) -> bool {
        !self.table && !self.metadata_only
    }
}

/// Whether `raw` is served exactly as stored at `info`'s version: stored at that version and
/// kind, by a resource that serves objects as it stores them.
pub(crate) fn served_as_stored(info: &ResourceInfo, raw: &[u8]) -> bool {
    info.strategy.serves_as_stored() && storage::stored_as(raw, &info.api_version(), &info.kind)
}

/// A list object; its items moved in, not copied. Items of built-in kinds carry no apiVersion
/// and kind (their type is the list's), as kube-apiserver writes them; custom resources' do.
fn collection(info: &ResourceInfo, metadata: Value, mut items: Vec<Value>) -> Value {
    if info.custom.is_none() {
        for item in &mut items {
            if let Some(o) = item.as_object_mut() {
                o.remove("apiVersion");
                o.remove("kind");
            }
        }
    }
    let mut list = Map::new();
    list.insert("apiVersion".into(), Value::String(info.api_version()));
    list.insert("items".into(), Value::Array(items));
    list.insert("kind".into(), Value::String(info.list_kind.clone()));
    list.insert("metadata".into(), metadata);
    Value::Object(list)
}

/// `info`'s list of objects served as stored, written out from their stored bytes as
/// [`collection`] and [`crate::encode`] would write them; None when an object is not stored as
/// it is served.
fn stored_list(
    info: &ResourceInfo,
    metadata: &Map<String, Value>,
    items: &[Bytes],
) -> Option<Bytes> {
    if !info.strategy.serves_as_stored() {
        return None;
    }
    let api_version = info.api_version();
    let mut meta = Vec::new();
    // A built-in kind's stored bytes start with its kind and apiVersion (see
    // `encode::type_prefix`): its items are the rest.
    let prefix = match &info.custom {
        None => Some(crate::encode::type_prefix(&api_version, &info.kind)?),
        Some(_) => None,
    };
    let mut out = Vec::with_capacity(items.iter().map(|raw| raw.len()).sum::<usize>() + 256);
    let mut item_bytes = Vec::with_capacity(items.len());
    for raw in items {
        let body = raw.strip_suffix(b"\n").unwrap_or(raw);
        match &prefix {
            Some(prefix) => item_bytes.push((true, body.strip_prefix(prefix.as_slice())?)),
            None if served_as_stored(info, body) => item_bytes.push((false, body)),
            None => return None,
        }
    }
    let write_items = |out: &mut Vec<u8>| {
        out.push(b'[');
        for (i, (stripped, body)) in item_bytes.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if *stripped {
                out.push(b'{');
            }
            out.extend_from_slice(body);
        }
        out.push(b']');
    };
    // Writing JSON into a Vec cannot fail.
    let kind = serde_json::to_string(&info.list_kind).unwrap_or_default();
    let version = serde_json::to_string(&api_version).unwrap_or_default();
    if prefix.is_some() {
        crate::encode::write_list_meta(metadata, &mut meta);
        out.extend_from_slice(b"{\"kind\":");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b",\"apiVersion\":");
        out.extend_from_slice(version.as_bytes());
        out.extend_from_slice(b",\"metadata\":");
        out.extend_from_slice(&meta);
        out.extend_from_slice(b",\"items\":");
        write_items(&mut out);
    } else {
        crate::encode::write_json(&Value::Object(metadata.clone()), &mut meta);
        out.extend_from_slice(b"{\"apiVersion\":");
        out.extend_from_slice(version.as_bytes());
        out.extend_from_slice(b",\"items\":");
        write_items(&mut out);
        out.extend_from_slice(b",\"kind\":");
        out.extend_from_slice(kind.as_bytes());
        out.extend_from_slice(b",\"metadata\":");
        out.extend_from_slice(&meta);
    }
    out.extend_from_slice(b"}\n");
    Some(Bytes::from(out))
}

/// The page token of a paginated list, shaped as kube-apiserver's: unpadded URL-safe base64 of
/// `{"v":"meta.k8s.io/v1","rv":RV,"start":"<key after the last item>"}`.
fn encode_continue(rv: i64, ns: &str, name: &str) -> String {
    use base64::Engine;
    let key = if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}/{name}")
    };
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": format!("{key}\u{0}")});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw.to_string())
}

/// The resourceVersion and the last item (namespace, name) of a page token; a token the server
/// never gave is refused in kube-apiserver's words.
fn decode_continue(token: &str) -> ApiResult<(i64, String, String)> {
    use base64::Engine;
    let bad = |why: String| {
        ApiError::BadRequest(format!(
            "invalid continue token: continue key is not valid: {why}"
        ))
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|e| {
            let at = match e {
                base64::DecodeError::InvalidByte(at, _)
                | base64::DecodeError::InvalidLastSymbol(at, _) => at,
                base64::DecodeError::InvalidLength(len) => len.saturating_sub(1),
                base64::DecodeError::InvalidPadding => token.len(),
            };
            bad(format!("illegal base64 data at input byte {at}"))
        })?;
    if let Some(syntax) = crate::gojson::syntax_error(&raw) {
        return Err(bad(syntax));
    }
    let v: Value = serde_json::from_slice(&raw).map_err(|e| bad(e.to_string()))?;
    match v.get("v").and_then(Value::as_str).unwrap_or("") {
        "meta.k8s.io/v1" => {}
        other => {
            return Err(bad(format!(
                "server does not recognize this encoded version {other:?}"
            )));
        }
    }
    let rv = v.get("rv").and_then(Value::as_i64).unwrap_or(0);
    if rv == 0 {
        return Err(bad(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into(),
        ));
    }
    let start = v.get("start").and_then(Value::as_str).unwrap_or("");
    let key = start.strip_suffix('\u{0}').unwrap_or(start);
    if key.is_empty() {
        return Err(bad(
            "encoded start key empty (version meta.k8s.io/v1)".into()
        ));
    }
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    Ok((rv, ns.to_string(), name.to_string()))
}

/// How to render objects in an answer.
#[derive(Debug, Clone, Copy)]
pub struct Render {
    pub table: bool,
    pub include: IncludeObject,
    /// Answer PartialObjectMetadata(List) instead of whole objects.
    pub metadata_only: bool,
}

impl ApiServer {
    fn not_found(t: &Target) -> ApiError {
        ApiError::NotFound(subject(&t.info, t.name()))
    }

    /// GET of one object.
    pub fn get(&self, t: &Target, render: Render) -> ApiResult<Answer> {
        let raw = self
            .store
            .get_stored(&t.key(), &t.namespace, t.name())
            .ok_or_else(|| Self::not_found(t))?;
        if t.part != Part::Scale && render.whole_objects() && served_as_stored(&t.info, &raw) {
            return Ok(Answer::json(raw));
        }
        let obj = self
            .conversions
            .served_one(&t.info, &storage::decode(&raw))?;
        if let (Part::Scale, Some(paths)) = (t.part, &t.info.scale) {
            return Ok(Answer::ok(crate::scale::to_scale(paths, &obj)));
        }
        if render.metadata_only {
            return Ok(Answer::ok(table::partial(&obj)));
        }
        if render.table {
            let rv = obj.resource_version().to_string();
            return Ok(Answer::ok(table::table(
                &t.info.printer_columns,
                &[obj],
                render.include,
                json!({"resourceVersion": rv}),
                true,
            )));
        }
        Ok(Answer::ok(obj))
    }

    /// GET of a collection, with selectors and limit/continue.
    pub fn list(&self, t: &Target, q: &Query, render: Render) -> ApiResult<Answer> {
        let filter = Filter::from_query(&t.info, q)?;
        let limit = match q.get("limit") {
            None | Some("") => 0,
            Some(l) => l
                .parse::<i64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid limit: {l:?}")))?
                .max(0) as usize,
        };
        let ns = (!t.namespace.is_empty()).then_some(t.namespace.as_str());
        let after = match q.get("continue").filter(|c| !c.is_empty()) {
            Some(c) => Some(decode_continue(c)?),
            None => None,
        };
        // Later pages show the collection as it was when the first page was read.
        let (rv, items) = match &after {
            Some((at, ans, aname)) => {
                let items = self
                    .store
                    .list_at(&t.key(), ns, (ans.as_str(), aname.as_str()), *at)
                    .map_err(|_| ApiError::ExpiredContinue)?;
                (*at, items)
            }
            None => self
                .store
                .select(&t.key(), t.stored_namespace(), &filter.lookups()),
        };
        // Only as far as the page goes, and decoded only to be filtered: a page of 500 of
        // 70,000 objects must not hold all 70,000 decoded (nor decode them).
        let mut page = Vec::new();
        let mut more = false;
        let mut remaining = 0i64;
        let mut items = items.into_iter();
        while let Some(raw) = items.next() {
            if !filter.is_empty() && !filter.matches(&storage::decode(&raw)) {
                continue;
            }
            if limit > 0 && page.len() == limit {
                more = true;
                // Read only without a filter, when every object left is one more item.
                remaining = 1 + i64::try_from(items.len()).unwrap_or(i64::MAX);
                break;
            }
            page.push(raw);
        }
        let mut meta = Map::new();
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        if more && let Some(last) = page.last() {
            let last = storage::decode(last);
            let next = encode_continue(rv, last.namespace(), last.name());
            meta.insert("continue".into(), Value::String(next));
            if filter.is_empty() {
                meta.insert("remainingItemCount".into(), Value::from(remaining));
            }
        }
        if render.whole_objects()
            && let Some(list) = stored_list(&t.info, &meta, &page)
        {
            return Ok(Answer::json(list));
        }
        let out = page.iter().map(|raw| storage::decode(raw)).collect();
        let out = self.conversions.served(&t.info, out)?;
        let meta = Value::Object(meta);
        if render.metadata_only {
            let items: Vec<Value> = out.iter().map(table::partial).collect();
            return Ok(Answer::ok(json!({"kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": items})));
        }
        if render.table {
            return Ok(Answer::ok(table::table(
                &t.info.printer_columns,
                &out,
                render.include,
                meta,
                true,
            )));
        }
        Ok(Answer::ok(collection(&t.info, meta, out)))
    }

    fn check_namespace(&self, t: &Target, name: &str) -> ApiResult<()> {
        if !t.info.namespaced {
            return Ok(());
        }
        match self.store.get("/namespaces", "", &t.namespace) {
            None => Err(ApiError::NotFound(crate::error::Subject {
                group: String::new(),
                kind: "namespaces".into(),
                name: t.namespace.clone(),
            })),
            Some(ns) if ns.is_deleting() => Err(ApiError::Forbidden {
                subject: subject(&t.info, name),
                message: format!(
                    "{} {name:?} is forbidden: unable to create new content in namespace {} because it is being terminated",
                    if t.info.group.is_empty() {
                        t.info.plural.clone()
                    } else {
                        format!("{}.{}", t.info.plural, t.info.group)
                    },
                    t.namespace
                ),
                cause: Some((
                    "NamespaceTerminating".into(),
                    format!("namespace {} is being terminated", t.namespace),
                )),
            }),
            Some(_) => Ok(()),
        }
    }

    async fn finish(&self, t: &Target, written: crate::storage::Written) -> ApiResult<Arc<Value>> {
        written
            .ack
            .wait()
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        if t.info.strategy.defines_resources() {
            let name = written.object.name();
            match self.store.get(CRD_KEY, "", name) {
                Some(c) if c.resource_version() == written.object.resource_version() => {
                    self.settle_crd(name).await;
                }
                // A dry run, or written again since.
                Some(_) => self.sync_crd(name),
                None => {
                    self.sync_crd(name);
                    // Its names are free: the CRDs refused them may take them now.
                    let (_, crds) = self.store.list(CRD_KEY, None, None);
                    for crd in crds.iter().filter(|c| !apiextensions::serves(c)) {
                        self.settle_crd(crd.name()).await;
                    }
                }
            }
        }
        Ok(written.object)
    }

    /// Does what kube-apiserver's apiextensions naming and establishing controllers do as
    /// soon as a CRD is written (its names accepted unless taken, then established, written
    /// through `/status` by `kube-apiserver`), then serves what it defines.
    async fn settle_crd(&self, name: &str) {
        if let Some(crd) = self.store.get(CRD_KEY, "", name)
            && !crd.is_deleting()
            && let Some(info) =
                self.registry
                    .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        {
            let now = now_rfc3339();
            let (_, crds) = self.store.list(CRD_KEY, None, None);
            if let Some(mut next) = apiextensions::controlled_status(&crd, &crds, &now) {
                let t = Target {
                    info: info.clone(),
                    namespace: String::new(),
                    name: Some(name.to_string()),
                    part: Part::Status,
                };
                self.recorder(&t, &now)
                    .update(&crd, &mut next, "kube-apiserver");
                writes::canonical(&info, &mut next);
                let seen = crd.resource_version().to_string();
                let written = self.store.write(CRD_KEY, "", name, false, |cur| {
                    Ok::<_, ApiError>(match cur {
                        Some(c) if c.resource_version() == seen => WriteOp::Put(next),
                        // Written again meanwhile: that write settles it.
                        _ => WriteOp::Unchanged,
                    })
                });
                match written {
                    Ok(w) => {
                        if let Err(e) = w.ack.wait().await {
                            tracing::warn!(crd = %name, error = %e, "accepting the CRD's names was not stored");
                        }
                    }
                    Err(e) => {
                        tracing::warn!(crd = %name, error = %ApiError::from(e), "accepting the CRD's names failed")
                    }
                }
            }
        }
        self.sync_crd(name);
    }

    /// Makes the registry serve exactly what the stored CRD says, once its names are
    /// accepted.
    pub fn sync_crd(&self, name: &str) {
        match self.store.get(CRD_KEY, "", name) {
            Some(crd) if apiextensions::serves(&crd) => {
                if let Ok(infos) = crate::strategy::apiextensions::resources_from_crd(&crd) {
                    self.registry.set_crd(name, infos);
                }
                // Removed meanwhile (its removal's own sync may have run before this one's
                // entries went in): serve it no more.
                if self.store.get(CRD_KEY, "", name).is_none() {
                    self.registry.remove_crd(name);
                }
            }
            _ => self.registry.remove_crd(name),
        }
    }

    /// POST: create.
    pub async fn create(
        &self,
        t: &Target,
        body: impl Into<Decoded>,
        opts: &WriteOptions,
    ) -> ApiResult<Answer> {
        if t.info.custom.is_some() && self.crd_terminating(&t.info) {
            return Err(ApiError::MethodNotAllowed(subject(&t.info, "")));
        }
        let now = now_rfc3339();
        let body = body.into();
        objects::check_type_meta(&t.info, &body.object)?;
        let mut warnings = Vec::new();
        let mut body = writes::take_body(&t.info, body, opts.validation, &mut warnings)?;
        if !body.resource_version().is_empty() {
            return Err(ApiError::BadRequest(
                "resourceVersion should not be set on objects to be created".into(),
            ));
        }
        self.recorder(t, &now).create(&mut body, opts.manager());
        let mut obj = prepare_create(&t.info, &t.namespace, body, &now)?;
        warnings.extend(t.info.strategy.warnings_on_create(&obj));
        if let Some(user) = &opts.user {
            t.info.strategy.record_requester(&mut obj, user);
        }
        let name = obj.name().to_string();
        self.check_namespace(t, &name)?;
        let mut obj = self.admit_create(t, obj, opts)?;
        t.info.strategy.admit_create(&t.info, &obj)?;
        if t.info.strategy.pod_admission() == Some(PodAdmission::Pod) {
            let facts = pod_admission::new_pod_facts(&self.store, &t.namespace, &obj).await;
            pod_admission::admit_new_pod(&t.info, &mut obj, &facts)?;
        }
        warnings.extend(pod_admission::pod_security(
            &self.store,
            &t.info,
            "",
            &obj,
            None,
        )?);
        let obj = self.stored_form(&t.info, obj)?;
        let info = t.info.clone();
        let written = self
            .store
            .write(&t.key(), &t.namespace, &name, opts.dry_run, |cur| {
                if cur.is_some() {
                    return Err(ApiError::AlreadyExists(subject(&info, &name)));
                }
                Ok(WriteOp::Put(obj))
            })?;
        let answer = self.written_answer(t, 201, written).await?;
        Ok(answer.warned(warnings))
    }

    /// The field manager of a write to `t`.
    fn recorder<'a>(&'a self, t: &'a Target, now: &'a str) -> writes::Recorder<'a> {
        writes::Recorder {
            info: &t.info,
            registry: &self.registry,
            conversions: &self.conversions,
            part: t.part,
            now,
        }
    }

    /// An object as it is stored: in its Go type's form, at its CRD's storage version.
    fn stored_form(&self, info: &ResourceInfo, mut obj: Value) -> ApiResult<Value> {
        writes::canonical(info, &mut obj);
        self.conversions.stored(info, obj)
    }

    fn crd_terminating(&self, info: &ResourceInfo) -> bool {
        info.custom.as_ref().is_some_and(|c| {
            self.store
                .get(
                    "apiextensions.k8s.io/customresourcedefinitions",
                    "",
                    &c.crd_name,
                )
                .is_some_and(|crd| crd.is_deleting())
        })
    }

    /// PUT: update (or a subresource update); of a missing object, a create where the resource
    /// allows it.
    pub async fn update(
        &self,
        t: &Target,
        body: impl Into<Decoded>,
        opts: &WriteOptions,
    ) -> ApiResult<Answer> {
        let now = now_rfc3339();
        let info = t.info.clone();
        let part = t.part;
        let manager = opts.manager().to_string();
        let body = body.into();
        objects::check_names(&body.object, t.name(), &t.namespace)?;
        if part == Part::Main
            && info.strategy.allows_create_on_update()
            && body.object.resource_version().is_empty()
            && self.store.get(&t.key(), &t.namespace, t.name()).is_none()
        {
            return self.create(t, body, opts).await;
        }
        let mut warnings = Vec::new();
        let body = match part {
            Part::Scale => body.object,
            _ => {
                objects::check_type_meta(&info, &body.object)?;
                writes::take_body(&info, body, opts.validation, &mut warnings)?
            }
        };
        let recorder = self.recorder(t, &now);
        let mut noted = Vec::new();
        let written = self.write_decided(t, opts.dry_run, |cur| {
            let cur = cur.ok_or_else(|| Self::not_found(t))?;
            let cur = self.as_served(&info, cur)?;
            let next = match (part, &info.scale) {
                (Part::Scale, Some(paths)) => {
                    let mut next = crate::scale::apply_scale(&info.kind, paths, &cur, &body)?;
                    recorder.update(&cur, &mut next, &manager);
                    prepare_update(&info, &cur, next, Part::Main, false)?
                }
                _ => {
                    let mut next = body.clone();
                    recorder.update(&served_view(&info, &cur), &mut next, &manager);
                    prepare_update(&info, &cur, next, part, true)?
                }
            };
            noted = info.strategy.warnings_on_update(&next, &cur);
            let op = self.admit_update(t, &cur, next, opts, &mut noted)?;
            self.to_stored(&info, op)
        })?;
        warnings.extend(noted);
        let answer = self.written_answer(t, 200, written).await?;
        Ok(answer.warned(warnings))
    }

    /// A write's answer once it is durable: the object as served, from its stored bytes when
    /// it is served as stored (an update that removed the object answers it as the update
    /// left it: see [`WriteOp::DeleteAs`]).
    async fn written_answer(
        &self,
        t: &Target,
        code: u16,
        written: crate::storage::Written,
    ) -> ApiResult<Answer> {
        let stored = written.stored.clone();
        let obj = self.finish(t, written).await?;
        // The stored bytes encode `obj`: its type meta says whether they are served as they are.
        let as_stored = t.part != Part::Scale
            && t.info.strategy.serves_as_stored()
            && obj.get("apiVersion").and_then(Value::as_str) == Some(t.info.api_version().as_str())
            && obj.get("kind").and_then(Value::as_str) == Some(t.info.kind.as_str());
        let body = match stored.filter(|_| as_stored) {
            Some(raw) => Reply::Json(raw),
            None => Reply::Object(self.render_written(t, &obj)?),
        };
        Ok(Answer {
            code,
            body,
            warnings: Vec::new(),
        })
    }

    fn render_written(&self, t: &Target, obj: &Value) -> ApiResult<Value> {
        let obj = self.conversions.served_one(&t.info, obj)?;
        Ok(match (t.part, &t.info.scale) {
            (Part::Scale, Some(paths)) => crate::scale::to_scale(paths, &obj),
            _ => obj,
        })
    }

    /// `cur` (as stored) as served at `info`'s version: borrowed unless its CRD's converter
    /// must change it.
    fn as_served<'a>(&self, info: &ResourceInfo, cur: &'a Value) -> ApiResult<Cow<'a, Value>> {
        if Converters::needed(info, cur) {
            Ok(Cow::Owned(self.conversions.served_one(info, cur)?))
        } else {
            Ok(Cow::Borrowed(cur))
        }
    }

    /// What a decided write stores: the object in its stored form.
    fn to_stored(&self, info: &ResourceInfo, op: WriteOp) -> ApiResult<WriteOp> {
        match op {
            WriteOp::Put(next) => Ok(WriteOp::Put(self.stored_form(info, next)?)),
            WriteOp::DeleteAs(last) => Ok(WriteOp::DeleteAs(self.stored_form(info, last)?)),
            other => Ok(other),
        }
    }

    /// PATCH: JSON, merge, strategic or apply.
    pub async fn patch(
        &self,
        t: &Target,
        kind: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> ApiResult<Answer> {
        let now = now_rfc3339();
        let info = t.info.clone();
        let part = t.part;
        if kind == PatchType::Apply && part == Part::Scale {
            return Err(ApiError::UnsupportedMediaType(
                patch::PATCH_TYPES_SCALE.into(),
            ));
        }
        let config = if kind == PatchType::Apply {
            if opts.field_manager.is_none() {
                return Err(ApiError::invalid(
                    crate::error::Subject {
                        group: "meta.k8s.io".into(),
                        kind: "PatchOptions".into(),
                        name: String::new(),
                    },
                    vec![crate::error::FieldError::required(
                        "fieldManager",
                        "is required for apply patch",
                    )],
                ));
            }
            let c = patch::parse_apply_body(body)?;
            writes::check_apply_kind(&info, &c)?;
            Some(c)
        } else {
            None
        };
        let creating =
            kind == PatchType::Apply && self.store.get(&t.key(), &t.namespace, t.name()).is_none();
        if creating {
            if part != Part::Main {
                return Err(Self::not_found(t));
            }
            self.check_namespace(t, t.name())?;
        }
        let manager = opts.manager().to_string();
        let force = opts.force;
        let ns = t.namespace.clone();
        let name = t.name().to_string();
        let new_pod = match &config {
            Some(config)
                if creating && info.strategy.pod_admission() == Some(PodAdmission::Pod) =>
            {
                Some(pod_admission::new_pod_facts(&self.store, &ns, config).await)
            }
            _ => None,
        };
        let recorder = self.recorder(t, &now);
        let mut created = false;
        let mut warnings = Vec::new();
        let written = self.write_decided(t, opts.dry_run, |cur| {
            created = false;
            warnings.clear();
            match (cur, &config) {
                (None, Some(config)) => {
                    let applied = recorder.apply(None, config, &manager, force)?;
                    let mut obj = writes::take_applied(&info, applied);
                    check_applied_name(&obj, &name)?;
                    crate::meta::meta_mut(&mut obj).insert("name".into(), json!(name));
                    let mf = obj.pointer("/metadata/managedFields").cloned();
                    let mut obj = prepare_create(&info, &ns, obj, &now)?;
                    warnings.extend(info.strategy.warnings_on_create(&obj));
                    if let Some(user) = &opts.user {
                        info.strategy.record_requester(&mut obj, user);
                    }
                    let mut obj = self.admit_create(t, obj, opts)?;
                    if let Some(mf) = mf {
                        crate::meta::meta_mut(&mut obj).insert("managedFields".into(), mf);
                    }
                    if info.strategy.pod_admission() == Some(PodAdmission::Pod) {
                        // Looked up before the write, which found no object then.
                        let facts = new_pod
                            .as_ref()
                            .ok_or_else(|| ApiError::Conflict(subject(&info, &name)))?;
                        pod_admission::admit_new_pod(&info, &mut obj, facts)?;
                    }
                    warnings.extend(pod_admission::pod_security(
                        &self.store,
                        &info,
                        "",
                        &obj,
                        None,
                    )?);
                    created = true;
                    Ok(WriteOp::Put(self.stored_form(&info, obj)?))
                }
                (None, None) => Err(Self::not_found(t)),
                (Some(cur), Some(config)) => {
                    let cur = self.as_served(&info, cur)?;
                    let shown = present(&info, cur.clone().into_owned());
                    let applied = recorder.apply(Some(&shown), config, &manager, force)?;
                    let obj = writes::take_applied(&info, applied);
                    check_applied_name(&obj, &name)?;
                    let next = prepare_update(&info, &cur, obj, part, false)?;
                    warnings.extend(info.strategy.warnings_on_update(&next, &cur));
                    let op = self.admit_update(t, &cur, next, opts, &mut warnings)?;
                    self.to_stored(&info, op)
                }
                (Some(cur), None) => {
                    let cur = self.as_served(&info, cur)?;
                    let next = match (part, &info.scale) {
                        (Part::Scale, Some(paths)) => {
                            let shown = crate::scale::to_scale(paths, &cur);
                            let patched = patch::apply_patch(kind, &shown, body)?.object;
                            let mut next =
                                crate::scale::apply_scale(&info.kind, paths, &cur, &patched)?;
                            recorder.update(&cur, &mut next, &manager);
                            prepare_update(&info, &cur, next, Part::Main, false)?
                        }
                        _ => {
                            let shown = present(&info, cur.clone().into_owned());
                            let patched = patch::apply_patch(kind, &shown, body)?;
                            let mut next = writes::take_patched(
                                &info,
                                patched,
                                opts.validation,
                                &mut warnings,
                            )?;
                            recorder.update(&shown, &mut next, &manager);
                            prepare_update(&info, &cur, next, part, false)?
                        }
                    };
                    warnings.extend(info.strategy.warnings_on_update(&next, &cur));
                    let op = self.admit_update(t, &cur, next, opts, &mut warnings)?;
                    self.to_stored(&info, op)
                }
            }
        })?;
        let answer = self
            .written_answer(t, if created { 201 } else { 200 }, written)
            .await?;
        Ok(answer.warned(warnings))
    }

    /// DELETE of one object.
    pub async fn delete(&self, t: &Target, opts: &DeleteOptions) -> ApiResult<Answer> {
        opts.validate()?;
        let now = now_rfc3339();
        let info = t.info.clone();
        let mut outcome = DeleteOutcome::Removed;
        let written = self.write_decided(t, opts.dry_run, |cur| {
            let cur = cur.ok_or_else(|| Self::not_found(t))?;
            let (op, o) = decide_delete(&info, cur, opts, &now)?;
            self.admit_delete(t, cur, opts)?;
            outcome = o;
            Ok(op)
        })?;
        let obj = self.finish(t, written).await?;
        if outcome == DeleteOutcome::MarkedThenRemoved {
            let removed = self.write_decided(t, opts.dry_run, |cur| match cur {
                Some(cur) if cur.uid() == obj.uid() => Ok(WriteOp::Delete),
                _ => Err(Self::not_found(t)),
            })?;
            self.finish(t, removed).await?;
            outcome = DeleteOutcome::Removed;
        }
        if outcome == DeleteOutcome::Removed && !t.info.strategy.returns_deleted_object() {
            return Ok(Answer::ok(objects::delete_success(&t.info, &obj)));
        }
        Ok(Answer::ok(self.conversions.served_one(&t.info, &obj)?))
    }

    /// DELETE of a collection.
    pub async fn delete_collection(
        &self,
        t: &Target,
        q: &Query,
        opts: &DeleteOptions,
    ) -> ApiResult<Answer> {
        opts.validate()?;
        let filter = Filter::from_query(&t.info, q)?;
        let (rv, items) = self
            .store
            .select(&t.key(), t.stored_namespace(), &filter.lookups());
        let mut out = Vec::new();
        for obj in items
            .iter()
            .map(|raw| storage::decode(raw))
            .filter(|o| filter.matches(o))
        {
            let one = Target {
                namespace: obj.namespace().to_string(),
                name: Some(obj.name().to_string()),
                ..t.clone()
            };
            match self.delete(&one, opts).await {
                Ok(_) => out.push(obj),
                Err(ApiError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Answer::ok(collection(
            &t.info,
            json!({"resourceVersion": rv.to_string()}),
            self.conversions.served(&t.info, out)?,
        )))
    }

    /// Stores what `decide` makes of the current object. `decide` runs outside the store's lock,
    /// so admission plugins may run in it; the result is stored only if the object is still as
    /// `decide` saw it, and otherwise `decide` runs again on the new state (as kube-apiserver's
    /// GuaranteedUpdate retries).
    fn write_decided<F>(
        &self,
        t: &Target,
        dry_run: bool,
        mut decide: F,
    ) -> ApiResult<crate::storage::Written>
    where
        F: FnMut(Option<&Arc<Value>>) -> ApiResult<WriteOp>,
    {
        let key = t.key();
        loop {
            let read = self.store.read(&key, &t.namespace, t.name());
            let op = decide(read.as_ref().map(|r| &r.object))?;
            let seen = read
                .as_ref()
                .map(|r| r.object.resource_version().to_string());
            let mut moved = false;
            let written = self.store.write_after(
                &key,
                &t.namespace,
                t.name(),
                dry_run,
                read.as_ref(),
                |now| {
                    if now.map(|o| o.resource_version()) != seen.as_deref() {
                        moved = true;
                        return Err(ApiError::Conflict(subject(&t.info, t.name())));
                    }
                    Ok(op)
                },
            );
            if !moved {
                return written.map_err(ApiError::from);
            }
        }
    }

    /// Admits a new object (its create); a plugin's changes are validated again.
    fn admit_create(&self, t: &Target, obj: Value, opts: &WriteOptions) -> ApiResult<Value> {
        let Some(user) = opts.user.as_ref().filter(|_| !self.admission.is_empty()) else {
            return Ok(obj);
        };
        let name = obj.name().to_string();
        let attempt = Attempt {
            operation: Operation::Create,
            user,
            info: &t.info,
            subresource: "",
            namespace: &t.namespace,
            name: &name,
            old_object: None,
            dry_run: opts.dry_run,
        };
        let admitted = self
            .admission
            .admit(&self.store, &attempt, Some(obj.clone()))?;
        match admitted {
            Some(mut changed) if changed != obj => {
                objects::keep_server_metadata(&obj, &mut changed);
                objects::validate(&t.info, &mut changed, None)?;
                Ok(changed)
            }
            _ => Ok(obj),
        }
    }

    /// Admits an update of `cur` to `next` (as [`prepare_update`] made it) and settles what it
    /// comes to; a plugin's changes are validated again, and PodSecurity's warnings added to
    /// `warnings`.
    fn admit_update(
        &self,
        t: &Target,
        cur: &Value,
        next: Value,
        opts: &WriteOptions,
        warnings: &mut Vec<String>,
    ) -> ApiResult<WriteOp> {
        let next = self.admit_update_by_plugins(t, cur, next, opts)?;
        warnings.extend(pod_admission::pod_security(
            &self.store,
            &t.info,
            t.part.name(),
            &next,
            Some(cur),
        )?);
        settle_update(&t.info, cur, next)
    }

    /// The embedder's plugins' view of an update: `next` as they leave it, validated again.
    fn admit_update_by_plugins(
        &self,
        t: &Target,
        cur: &Value,
        next: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Value> {
        let Some(user) = opts.user.as_ref().filter(|_| !self.admission.is_empty()) else {
            return Ok(next);
        };
        let attempt = Attempt {
            operation: Operation::Update,
            user,
            info: &t.info,
            subresource: t.part.name(),
            namespace: &t.namespace,
            name: t.name(),
            old_object: Some(cur),
            dry_run: opts.dry_run,
        };
        let next = match self
            .admission
            .admit(&self.store, &attempt, Some(next.clone()))?
        {
            Some(mut changed) if changed != next => {
                objects::keep_server_metadata(&next, &mut changed);
                if matches!(t.part, Part::Main | Part::Status | Part::Approval) {
                    objects::validate_part(&t.info, &mut changed, Some(cur), t.part)?;
                } else if t.part == Part::Scale {
                    objects::validate(&t.info, &mut changed, Some(cur))?;
                }
                changed
            }
            _ => next,
        };
        Ok(next)
    }

    /// Admits the delete of `cur`.
    fn admit_delete(&self, t: &Target, cur: &Value, opts: &DeleteOptions) -> ApiResult<()> {
        let Some(user) = opts.user.as_ref().filter(|_| !self.admission.is_empty()) else {
            return Ok(());
        };
        let attempt = Attempt {
            operation: Operation::Delete,
            user,
            info: &t.info,
            subresource: "",
            namespace: &t.namespace,
            name: t.name(),
            old_object: Some(cur),
            dry_run: opts.dry_run,
        };
        self.admission
            .admit(&self.store, &attempt, None)
            .map(|_| ())
    }

    /// Internal write used by the server's controllers: re-reads, changes, stores.
    pub async fn modify<F>(&self, key: &str, ns: &str, name: &str, change: F) -> ApiResult<()>
    where
        F: FnOnce(&Value) -> Option<Value>,
    {
        let info = self.registry.by_storage_key(key).ok_or(ApiError::NoRoute)?;
        let written = self.store.write(key, ns, name, false, |cur| {
            let Some(cur) = cur else {
                return Err(ApiError::NotFound(subject(&info, name)));
            };
            match change(cur) {
                None => Ok(WriteOp::Unchanged),
                Some(next) => {
                    let mut next = next;
                    crate::meta::meta_mut(&mut next)
                        .insert("resourceVersion".into(), json!(cur.resource_version()));
                    match decide_update(&info, cur, next, Part::Main, false)? {
                        WriteOp::Put(mut obj) => {
                            writes::canonical(&info, &mut obj);
                            Ok(WriteOp::Put(obj))
                        }
                        other => Ok(other),
                    }
                }
            }
        });
        match written {
            Ok(w) => {
                let t = Target {
                    info,
                    namespace: ns.into(),
                    name: Some(name.into()),
                    part: Part::Main,
                };
                self.finish(&t, w).await.map(|_| ())
            }
            Err(WriteError::Refused(ApiError::NotFound(_))) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// `cur` (as stored, at the request's version) as its resource serves it, for the field
/// manager: borrowed unless the resource serves another form (events.k8s.io Events).
fn served_view<'a>(info: &ResourceInfo, cur: &'a Value) -> Cow<'a, Value> {
    if info.strategy.serves_as_stored() {
        Cow::Borrowed(cur)
    } else {
        Cow::Owned(present(info, cur.clone()))
    }
}

/// Refuses an applied object named otherwise than its URL.
fn check_applied_name(obj: &Value, url_name: &str) -> ApiResult<()> {
    if obj.name().is_empty() || obj.name() == url_name {
        return Ok(());
    }
    Err(ApiError::BadRequest(format!(
        "the name of the object ({}) does not match the name on the URL ({url_name})",
        obj.name()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selectors::{FieldReq, FieldSelector, LabelSelector};

    fn fields(reqs: &[(&str, &str, bool)]) -> Filter {
        Filter {
            labels: LabelSelector::default(),
            fields: FieldSelector(
                reqs.iter()
                    .map(|(path, value, negate)| FieldReq {
                        path: path.to_string(),
                        value: value.to_string(),
                        negate: *negate,
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn a_selector_on_name_and_namespace_is_decided_without_the_object() {
        let by_name = fields(&[("metadata.name", "hub", false)]);
        assert_eq!(by_name.matches_name("ns", "hub"), Some(true));
        assert_eq!(by_name.matches_name("ns", "other"), Some(false));
        let not_in = fields(&[
            ("metadata.namespace", "kube-system", true),
            ("metadata.name", "hub", false),
        ]);
        assert_eq!(not_in.matches_name("ns", "hub"), Some(true));
        assert_eq!(not_in.matches_name("kube-system", "hub"), Some(false));
        let by_field = fields(&[("spec.signerName", "x", false)]);
        assert_eq!(by_field.matches_name("ns", "hub"), None, "needs the object");
        let by_label = Filter {
            labels: LabelSelector::parse("a=b").unwrap(),
            ..fields(&[])
        };
        assert_eq!(by_label.matches_name("ns", "hub"), None, "needs the object");
    }

    fn stored(object: &Value) -> Bytes {
        Bytes::from(crate::encode::json(object))
    }

    fn leases() -> Arc<ResourceInfo> {
        Registry::with_builtins()
            .lookup("coordination.k8s.io", "v1", "leases")
            .unwrap()
    }

    #[test]
    fn an_object_is_served_as_stored_only_at_its_stored_version_and_kind() {
        let leases = leases();
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "a", "namespace": "n"}, "spec": {"holderIdentity": "x"}});
        assert!(served_as_stored(&leases, &stored(&lease)));
        let older = json!({"apiVersion": "coordination.k8s.io/v1beta1", "kind": "Lease"});
        assert!(!served_as_stored(&leases, &stored(&older)));
        let events = Registry::with_builtins()
            .lookup("events.k8s.io", "v1", "events")
            .unwrap();
        let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event"});
        assert!(
            !served_as_stored(&events, &stored(&event)),
            "events.k8s.io serves core Events in its own form"
        );
        // Escaped text in the type fields is read as what it says.
        let escaped = br#"{"apiVersion":"coordination.k8s.io\/v1","kind":"Lease"}"#;
        assert!(served_as_stored(&leases, escaped));
    }

    #[test]
    fn a_list_written_from_stored_bytes_is_the_list_decoded_and_written() {
        let widgets = crate::strategy::apiextensions::resources_from_crd(&json!({"spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}]}}))
        .unwrap()
        .remove(0);
        for (info, api_version, kind) in [
            (&*leases(), "coordination.k8s.io/v1", "Lease"),
            (&widgets, "example.com/v1", "Widget"),
        ] {
            let items: Vec<Value> = ["a", "b\"c"]
                .iter()
                .map(|name| {
                    json!({"apiVersion": api_version, "kind": kind,
                        "metadata": {"name": name, "namespace": "n", "resourceVersion": "7"},
                        "spec": {"leaseDurationSeconds": 10, "renewTime": "2026-11-26T00:00:00.000000Z"}})
                })
                .collect();
            let mut meta = Map::new();
            meta.insert("resourceVersion".into(), json!("9"));
            meta.insert("continue".into(), json!("token"));
            let raw: Vec<Bytes> = items.iter().map(stored).collect();
            let written = stored_list(info, &meta, &raw).unwrap();
            let decoded = crate::encode::json(&collection(info, Value::Object(meta), items));
            assert_eq!(
                String::from_utf8_lossy(&written),
                String::from_utf8_lossy(&decoded)
            );
            let empty = stored_list(info, &Map::new(), &[]).unwrap();
            assert_eq!(
                serde_json::from_slice::<Value>(&empty).unwrap()["items"],
                json!([])
            );
        }
    }

    #[test]
    fn list_items_of_built_in_kinds_carry_no_type() {
        let raw = stored(
            &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "a"}}),
        );
        let list = stored_list(&leases(), &Map::new(), &[raw]).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&list),
            "{\"kind\":\"LeaseList\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{},\"items\":[{\"metadata\":{\"name\":\"a\"}}]}\n"
        );
    }
}

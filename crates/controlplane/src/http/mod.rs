//! The HTTP front: routes requests to discovery, health, OpenAPI, resource operations and
//! watches, negotiates content types, and writes every error as a `Status` body.
//!
//! Owns routing and header parsing only: what a request asks is read once into a
//! [`RequestInfo`], which authorization, routing and the request counter share; what an
//! operation does is [`crate::api`]'s.

pub mod discovery;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::Frame;
use serde_json::Value;

use crate::api::{ApiServer, Query, Render, Reply, Target, UserInfo, WriteOptions};
use crate::auth::authn::StaticTokens;
use crate::auth::gate;
use crate::auth::reviews::{self, AccessReview};
use crate::auth::tls::PeerIdentity;
use crate::auth::tokens::SigningKey;
use crate::error::{ApiError, ApiResult};
use crate::fields::decode::{Decoded, decode_json};
use crate::patch::PatchType;
use crate::request_info::{RequestInfo, Verb};
use crate::resource::{DeleteOptions, Part, WriteCheck};
use crate::table::{IncludeObject, wants_table};

/// Response body type.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The subresource a ServiceAccount's tokens are requested through (a TokenRequest).
const TOKEN: &str = "token";

/// Largest request body accepted (as kube-apiserver: 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// Everything a request handler needs.
pub struct Frontend {
    pub api: Arc<ApiServer>,
    pub addr: String,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    pub bookmark_every: Duration,
    pub default_watch_timeout: Duration,
    /// Authentication and authorization; None serves everyone as an administrator.
    pub security: Option<Security>,
    /// Resource requests received, by verb and resource.
    pub requests: crate::requests::RequestCounter,
    /// The key ServiceAccount tokens are issued (TokenRequest) and verified with.
    pub token_key: Arc<SigningKey>,
    /// The runtime the control plane was started on, where in-process requests are handled as
    /// network ones are.
    pub runtime: tokio::runtime::Handle,
}

/// What a secured server checks requests against.
pub struct Security {
    pub tokens: StaticTokens,
    /// The RBAC policy, rebuilt when roles or bindings change (shared with admission).
    pub policy: Arc<gate::PolicyCache>,
}

/// Who a request comes from, as its transport knows it.
#[derive(Debug, Clone)]
pub enum Caller {
    /// An in-process or plain-HTTP client, served as this user without checks.
    Trusted(UserInfo),
    /// A TLS connection: authenticated from its certificate and headers, then authorized.
    Tls(PeerIdentity),
}

fn full(code: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed_unsync());
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

fn json_response(code: u16, v: &Value) -> Response<Body> {
    full(code, "application/json", crate::encode::json(v))
}

/// The form an answer is written in, as the request's Accept header asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Json,
    Yaml,
}

/// The first media type of `accept` this server writes: JSON (also for `*/*` and no header)
/// or YAML; None when it asks only for others (a 406).
fn negotiate(accept: &str) -> Option<Form> {
    if accept.trim().is_empty() {
        return Some(Form::Json);
    }
    accept
        .split(',')
        .find_map(|a| match a.split(';').next().unwrap_or("").trim() {
            "application/json" | "*/*" | "application/*" | "" => Some(Form::Json),
            "application/yaml" => Some(Form::Yaml),
            _ => None,
        })
}

fn error_response(e: &ApiError) -> Response<Body> {
    match e {
        ApiError::PageNotFound => full(404, "text/plain; charset=utf-8", "404 page not found\n"),
        e => json_response(e.code(), &e.to_status()),
    }
}

/// Authenticates, authorizes, routes and answers one request.
pub async fn handle<B>(fe: Arc<Frontend>, req: Request<B>, caller: Caller) -> Response<Body>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                return error_response(&ApiError::TooLarge);
            }
            return error_response(&ApiError::BadRequest(format!(
                "reading the request body: {e}"
            )));
        }
    };
    let query = Query::parse(parts.uri.query());
    let request = RequestInfo::new(&parts.method, parts.uri.path(), &query);
    let (user, policy) = match admit(&fe, caller, &request, &parts.headers) {
        Ok(admitted) => admitted,
        Err(e) => {
            tracing::debug!(method = %parts.method, path = %request.path, verb = %request.verb,
                code = e.code(), error = %e, "request refused");
            return error_response(&e);
        }
    };
    let call = Call {
        method: &parts.method,
        q: &query,
        headers: &parts.headers,
        body,
        user: &user,
        policy: policy
            .then(|| fe.security.as_ref().map(|s| s.policy.as_ref()))
            .flatten(),
    };
    match route(&fe, call, &request).await {
        Ok(r) => {
            // kube-apiserver's request log (its `-v=3` httplog): who asked what, to see which
            // client's requests a load is made of.
            tracing::trace!(verb = %request.verb, resource = %request.resource,
                subresource = %request.subresource, namespace = %request.namespace,
                name = %request.name, user = %user.name,
                manager = query.get("fieldManager").unwrap_or_default(),
                code = r.status().as_u16(), "request served");
            r
        }
        Err(e) => {
            tracing::debug!(method = %parts.method, path = %request.path, verb = %request.verb,
                resource = %request.resource, namespace = %request.namespace, name = %request.name,
                user = %user.name, manager = query.get("fieldManager").unwrap_or_default(),
                code = e.code(), error = %e, "request failed");
            error_response(&e)
        }
    }
}

/// Establishes the requester and checks RBAC on `request`; returns the user the request runs
/// as and whether authorization is on (then later checks consult the policy too).
fn admit(
    fe: &Frontend,
    caller: Caller,
    request: &RequestInfo,
    headers: &HeaderMap,
) -> ApiResult<(UserInfo, bool)> {
    let peer = match caller {
        Caller::Trusted(u) => return Ok((u, false)),
        Caller::Tls(peer) => peer,
    };
    let Some(security) = &fe.security else {
        return Ok((UserInfo::anonymous_admin(), false));
    };
    let user = gate::authenticate(
        &fe.api.store,
        &security.tokens,
        &fe.token_key,
        headers,
        &peer,
    )?;
    security.policy.check(&fe.api.store, |policy| {
        let user = gate::impersonate(policy, user, headers)?;
        gate::authorize(policy, &gate::attributes(request, &user))?;
        Ok((user, true))
    })
}

fn header_str(h: &HeaderMap, name: header::HeaderName) -> &str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

async fn route(fe: &Frontend, call: Call<'_>, request: &RequestInfo) -> ApiResult<Response<Body>> {
    if request.is_resource_request {
        return match (request.api_group.as_str(), request.api_version.as_str()) {
            ("authorization.k8s.io" | "authentication.k8s.io", "v1") => {
                review(fe, call, request).await
            }
            _ => resource(fe, call, request).await,
        };
    }
    let (method, q, headers) = (call.method, call.q, call.headers);
    let segs: Vec<&str> = request.parts.iter().map(String::as_str).collect();
    let accept = header_str(headers, header::ACCEPT);
    let registry = &fe.api.registry;
    let get_only = |r: Option<Value>| -> ApiResult<Response<Body>> {
        if method != Method::GET {
            return Err(ApiError::MethodNotAllowed(Default::default()));
        }
        r.map(|v| json_response(200, &v)).ok_or(ApiError::NoRoute)
    };
    match segs.as_slice() {
        [] => get_only(Some(serde_json::json!({"paths": [
            "/api", "/api/v1", "/apis", "/healthz", "/livez", "/metrics", "/readyz", "/openapi/v2", "/openapi/v3", "/version"
        ]}))),
        ["version"] => get_only(Some(discovery::version())),
        // The request counts, as kube-apiserver's `apiserver_request_total`; RBAC decides who
        // reads them (a nonResourceURLs rule for `/metrics`, as kube-apiserver's).
        ["metrics"] => {
            if method != Method::GET {
                return Err(ApiError::MethodNotAllowed(Default::default()));
            }
            Ok(full(
                200,
                "text/plain; version=0.0.4; charset=utf-8",
                fe.requests.metrics_text(),
            ))
        }
        [h @ ("healthz" | "livez" | "readyz"), rest @ ..] if rest.len() <= 1 => {
            if method != Method::GET && method != Method::HEAD {
                return Err(ApiError::MethodNotAllowed(Default::default()));
            }
            let ready = !*fe.shutdown.borrow() && fe.api.store.healthy();
            let (code, text) =
                discovery::health(h, q.get("verbose").is_some() && rest.is_empty(), ready);
            Ok(full(code, "text/plain; charset=utf-8", text))
        }
        ["api" | "apis"] if method == Method::GET && discovery::wants_aggregated(accept) => {
            let doc = discovery::aggregated(registry, segs[0] == "api");
            Ok(full(200, discovery::AGGREGATED, crate::encode::json(&doc)))
        }
        ["api"] => get_only(Some(discovery::core_versions(&fe.addr))),
        ["apis"] => get_only(Some(discovery::group_list(registry))),
        ["apis", g] => get_only(Some(
            discovery::group(registry, g).ok_or(ApiError::PageNotFound)?,
        )),
        ["api", "v1"] => get_only(discovery::resource_list(registry, "", "v1")),
        ["apis", g, v] => get_only(Some(
            discovery::resource_list(registry, g, v).ok_or(ApiError::PageNotFound)?,
        )),
        ["openapi", rest @ ..] => {
            if method != Method::GET {
                return Err(ApiError::MethodNotAllowed(Default::default()));
            }
            crate::openapi::serve(registry, rest, q, accept).map(|(ct, body)| full(200, ct, body))
        }
        _ => Err(ApiError::PageNotFound),
    }
}

/// The reviews answered without storing anything (see [`reviews`]); other resources of their
/// groups are not served.
async fn review(fe: &Frontend, call: Call<'_>, request: &RequestInfo) -> ApiResult<Response<Body>> {
    enum Kind<'a> {
        Access(AccessReview<'a>),
        Rules,
        Whoami,
        Token,
    }
    let one_level = request.parts.len() == 1;
    let namespace = request.namespace.as_str();
    let kind = match (request.api_group.as_str(), request.resource.as_str()) {
        _ if !one_level => None,
        ("authorization.k8s.io", "localsubjectaccessreviews") if !namespace.is_empty() => {
            Some(Kind::Access(AccessReview::Local { namespace }))
        }
        _ if !namespace.is_empty() => None,
        ("authorization.k8s.io", "selfsubjectaccessreviews") => {
            Some(Kind::Access(AccessReview::OwnAccess))
        }
        ("authorization.k8s.io", "subjectaccessreviews") => {
            Some(Kind::Access(AccessReview::Subject))
        }
        ("authorization.k8s.io", "selfsubjectrulesreviews") => Some(Kind::Rules),
        ("authentication.k8s.io", "selfsubjectreviews") => Some(Kind::Whoami),
        ("authentication.k8s.io", "tokenreviews") => Some(Kind::Token),
        _ => None,
    };
    let Some(kind) = kind else {
        return resource(fe, call, request).await;
    };
    if request.verb != Verb::Create {
        return Err(ApiError::MethodNotAllowed(Default::default()));
    }
    let now = crate::meta::now_rfc3339();
    let answer = match kind {
        // The review asks nothing: its answer comes from the request's credentials alone.
        Kind::Whoami => reviews::self_subject_review(call.user, &now),
        Kind::Token => {
            let body = decode_body(call.headers, &call.body, "")?;
            let security = fe.security.as_ref();
            reviews::token_review(&body, |token, audiences| {
                let tokens = security.map(|s| &s.tokens);
                gate::token_user(&fe.api.store, tokens, &fe.token_key, token, audiences)
            })?
        }
        Kind::Rules => {
            let body = decode_body(call.headers, &call.body, "")?;
            with_policy(fe, call.policy, |policy| {
                reviews::rules_review(policy, call.user, &body)
            })?
        }
        Kind::Access(review) => {
            let body = decode_body(call.headers, &call.body, "")?;
            let mut out = with_policy(fe, call.policy, |policy| {
                reviews::access_review(policy, call.user, review, &body)
            })?;
            // kube-apiserver records who wrote the review's fields, as for any created object.
            let status = out.as_object_mut().and_then(|o| o.remove("status"));
            let opts = WriteOptions::from_query(
                call.q,
                header_str(call.headers, header::USER_AGENT),
                call.user,
            )?;
            let api_version = format!("{}/{}", request.api_group, request.api_version);
            crate::writes::record_unstored(&mut out, opts.manager(), &api_version, "", &now);
            if let (Some(o), Some(status)) = (out.as_object_mut(), status) {
                o.insert("status".into(), status);
            }
            out
        }
    };
    Ok(json_response(201, &answer))
}

/// Runs `check` against the RBAC policy: the cached one when authorization is on, one read
/// now otherwise (a plain-HTTP server still answers reviews as RBAC would).
fn with_policy<R>(
    fe: &Frontend,
    cache: Option<&gate::PolicyCache>,
    check: impl FnOnce(&crate::auth::rbac::Policy) -> R,
) -> R {
    match cache {
        Some(cache) => cache.check(&fe.api.store, check),
        None => check(&gate::policy(&fe.api.store)),
    }
}

/// Decodes a request body of `kind` as an object, untyped.
fn decode_body(headers: &HeaderMap, body: &Bytes, kind: &str) -> ApiResult<Value> {
    decode_write(headers, body, None, kind).map(|d| d.object)
}

/// Decodes a create or update body of `kind`: JSON (or YAML-free JSON), or Kubernetes protobuf
/// for the kinds [`crate::protobuf`] knows; anything else is 415 as kube-apiserver answers.
/// JSON of a built-in kind is decoded as its Go type decodes it (see [`crate::fields::decode`]).
fn decode_write(
    headers: &HeaderMap,
    body: &Bytes,
    target: Option<&Target>,
    kind: &str,
) -> ApiResult<Decoded> {
    let ct = header_str(headers, header::CONTENT_TYPE);
    let base = ct.split(';').next().unwrap_or("").trim();
    match base {
        "" | "application/json" | "*/*" => {
            if body.is_empty() {
                return Err(ApiError::BadRequest("the request body is empty".into()));
            }
            let typed = target.and_then(|t| match (&t.info.fields, &t.info.custom, t.part) {
                (Some(ty), None, part) if part != Part::Scale => Some((&*ty.schema, ty.root)),
                _ => None,
            });
            decode_json(body, typed).map_err(|e| json_error(body, kind, e))
        }
        crate::protobuf::MEDIA_TYPE => crate::protobuf::decode(body).map(Decoded::from),
        _ => Err(ApiError::UnsupportedMediaType(
            "application/json, application/vnd.kubernetes.protobuf".into(),
        )),
    }
}

/// Parses a JSON body.
fn parse_body(body: &Bytes, kind: &str) -> ApiResult<Value> {
    if body.is_empty() {
        return Err(ApiError::BadRequest("the request body is empty".into()));
    }
    serde_json::from_slice(body).map_err(|e| json_error(body, kind, e))
}

/// Malformed JSON refused in kube-apiserver's words, quoting the body's first 30 bytes.
fn json_error(body: &Bytes, kind: &str, e: serde_json::Error) -> ApiError {
    let syntax = crate::gojson::syntax_error(body).unwrap_or_else(|| e.to_string());
    let head = String::from_utf8_lossy(&body[..body.len().min(30)]);
    let more = if body.len() > 30 { " ..." } else { "" };
    let unrecognized = if kind.is_empty() {
        String::new()
    } else {
        format!("the object provided is unrecognized (must be of type {kind}): ")
    };
    ApiError::BadRequest(format!(
        "{unrecognized}couldn't get version/kind; json parse error: {syntax} ({head}{more})"
    ))
}

/// One request, as the router hands it on.
struct Call<'a> {
    method: &'a Method,
    q: &'a Query,
    headers: &'a HeaderMap,
    body: Bytes,
    user: &'a UserInfo,
    /// Set when authorization is on: RBAC and CSR writes get extra checks against it.
    policy: Option<&'a gate::PolicyCache>,
}

/// Whether a request asks for a dry run (`dryRun=All`; another value is refused when its
/// options are read).
fn is_dry_run(q: &Query) -> bool {
    q.all("dryRun").contains(&"All")
}

/// A request to a served resource, done as its verb says: the verb RBAC allowed.
async fn resource(
    fe: &Frontend,
    call: Call<'_>,
    request: &RequestInfo,
) -> ApiResult<Response<Body>> {
    let Call {
        method,
        q,
        headers,
        body,
        user,
        policy,
    } = call;
    if request.parts.is_empty() || request.parts.len() > 3 {
        return Err(ApiError::NoRoute);
    }
    let registry = &fe.api.registry;
    let info = registry
        .lookup(&request.api_group, &request.api_version, &request.resource)
        .ok_or_else(|| {
            // A built-in group version answers for its own unknown resources; anything else
            // (a custom resource's group, an unknown group) falls through to the plain 404.
            let reviews = matches!(
                request.api_group.as_str(),
                "authorization.k8s.io" | "authentication.k8s.io"
            );
            if reviews || registry.serves_builtin(&request.api_group, &request.api_version) {
                ApiError::NoRoute
            } else {
                ApiError::PageNotFound
            }
        })?;
    // A cluster-scoped object lives in no namespace, whatever scope RBAC saw the request in.
    let namespace = match info.namespaced {
        true => request.namespace.as_str(),
        false if request.namespace.is_empty() || request.names_its_namespace() => "",
        // A custom resource's group answers unknown paths as kube-apiserver's CRD handler
        // does: a plain-text 404.
        false if info.custom.is_some() => {
            return Ok(full(
                404,
                "text/plain; charset=utf-8",
                "404 page not found\n",
            ));
        }
        false => return Err(ApiError::NoRoute),
    };
    let sub = request.parts.get(2).map(String::as_str);
    let verbs = match sub {
        None => info.verbs,
        Some(s) => {
            info.subresources
                .iter()
                .find(|x| x.name == s)
                .ok_or(ApiError::NoRoute)?
                .verbs
        }
    };
    if !verbs.contains(&request.verb.as_str()) {
        return Err(ApiError::MethodNotAllowed(crate::objects::subject(
            &info, "",
        )));
    }
    if sub == Some(TOKEN) {
        let opts = WriteOptions::from_query(q, header_str(headers, header::USER_AGENT), user)?;
        let answer = crate::token_request::create(
            &fe.api,
            &fe.token_key,
            namespace,
            request.path_name().unwrap_or(""),
            &decode_body(headers, &body, "TokenRequest")?,
            opts.manager(),
            &crate::meta::now_rfc3339(),
        )?;
        fe.requests.record(request, &user.name, is_dry_run(q));
        return Ok(json_response(201, &answer));
    }
    // Resources answered by handlers of their own reach here only when this server has none.
    if !info.stored {
        return Err(ApiError::NoRoute);
    }
    let part = Part::from_subresource(&info, sub).ok_or(ApiError::NoRoute)?;
    fe.requests.record(request, &user.name, is_dry_run(q));
    let name = request.path_name();
    let target = Target {
        info: info.clone(),
        namespace: namespace.to_string(),
        name: name.map(str::to_string),
        part,
    };
    let accept = header_str(headers, header::ACCEPT);
    let table = wants_table(accept);
    let form = match table {
        true => Form::Json,
        false => negotiate(accept).ok_or(ApiError::NotAcceptable)?,
    };
    let render = Render {
        table,
        include: IncludeObject::parse(q.get("includeObject")),
        metadata_only: crate::table::wants_metadata(accept),
    };
    let user_agent = header_str(headers, header::USER_AGENT);
    if let Some(policy) = policy {
        guard_write(fe, policy, &target, request, q, headers, &body, user).await?;
    }
    let not_allowed = || ApiError::MethodNotAllowed(Default::default());
    // Reads are GETs (a HEAD, or a POST to a legacy watch path, is no read).
    if matches!(request.verb, Verb::Get | Verb::List | Verb::Watch) && *method != Method::GET {
        return Err(not_allowed());
    }
    let answer = match &request.verb {
        Verb::Get => {
            if let Some(rv) = q.get("resourceVersion").filter(|rv| !rv.is_empty())
                && rv.parse::<u64>().is_err()
            {
                // kube-apiserver's storage fails to parse it: an error without a reason.
                return Err(ApiError::Unclassified {
                    code: 500,
                    message: format!(
                        "resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: invalid syntax"
                    ),
                });
            }
            fe.api.get(&target, render)?
        }
        Verb::List => fe.api.list(&target, q, render)?,
        Verb::Watch => {
            let t = Target {
                name: None,
                ..target
            };
            return match name {
                // A legacy watch of one object is a watch of the collection narrowed to it.
                Some(n) => {
                    let mut narrowed = q.clone();
                    narrowed
                        .0
                        .push(("fieldSelector".into(), format!("metadata.name={n}")));
                    watch_response(fe, t, &narrowed, render)
                }
                None => watch_response(fe, t, q, render),
            };
        }
        Verb::Create if name.is_none() => {
            if info.namespaced && namespace.is_empty() {
                return Err(not_allowed());
            }
            let opts = WriteOptions::from_query(q, user_agent, user)?;
            fe.api
                .create(
                    &target,
                    decode_write(headers, &body, Some(&target), &info.kind)?,
                    &opts,
                )
                .await?
        }
        Verb::Update if name.is_some() => {
            let opts = WriteOptions::from_query(q, user_agent, user)?;
            fe.api
                .update(
                    &target,
                    decode_write(headers, &body, Some(&target), &info.kind)?,
                    &opts,
                )
                .await?
        }
        Verb::Patch if name.is_some() => {
            let ct = header_str(headers, header::CONTENT_TYPE);
            let kind = PatchType::from_content_type(ct, info.strategy.accepts_strategic_merge())?;
            let opts = WriteOptions::from_query(q, user_agent, user)?;
            if body.is_empty() {
                return Err(ApiError::BadRequest("the request body is empty".into()));
            }
            fe.api.patch(&target, kind, &body, &opts).await?
        }
        verb @ (Verb::Delete | Verb::DeleteCollection) => {
            let mut opts = DeleteOptions {
                propagation: q.get("propagationPolicy").map(str::to_string),
                dry_run: WriteOptions::from_query(q, user_agent, user)?.dry_run,
                user: Some(user.clone()),
                ..Default::default()
            };
            if q.get("orphanDependents") == Some("true") {
                opts.propagation = Some("Orphan".into());
            }
            if !body.is_empty() {
                opts.merge_body(&parse_body(&body, "DeleteOptions")?)?;
            }
            match verb {
                Verb::Delete if part == Part::Main => fe.api.delete(&target, &opts).await?,
                Verb::Delete => return Err(not_allowed()),
                _ => fe.api.delete_collection(&target, q, &opts).await?,
            }
        }
        _ => return Err(not_allowed()),
    };
    let mut response = match (form, answer.body) {
        (Form::Json, Reply::Object(object)) => json_response(answer.code, &object),
        (Form::Json, Reply::Json(raw)) => full(answer.code, "application/json", raw),
        (Form::Yaml, body) => {
            let object = match body {
                Reply::Object(object) => object,
                Reply::Json(raw) => crate::storage::decode(&raw),
            };
            full(
                answer.code,
                "application/yaml",
                crate::encode::yaml::yaml(&object),
            )
        }
    };
    add_warnings(response.headers_mut(), &answer.warnings);
    Ok(response)
}

/// `Warning: 299 - "text"` for each distinct warning, in order, as kube-apiserver writes them
/// (quotes and backslashes escaped).
fn add_warnings(headers: &mut HeaderMap, warnings: &[String]) {
    let mut seen = std::collections::HashSet::new();
    for text in warnings.iter().filter(|w| seen.insert(w.as_str())) {
        let mut value = String::with_capacity(text.len() + 8);
        value.push_str("299 - \"");
        for c in text.chars() {
            if matches!(c, '"' | '\\') {
                value.push('\\');
            }
            value.push(c);
        }
        value.push('"');
        if let Ok(v) = header::HeaderValue::from_bytes(value.as_bytes()) {
            headers.append(header::WARNING, v);
        }
    }
}

/// The checks kube-apiserver makes beyond RBAC: CSR approval needs `approve` and CSR status
/// `sign` on the signer; roles and bindings may not grant more than their author holds.
#[allow(clippy::too_many_arguments)]
async fn guard_write(
    fe: &Frontend,
    policy: &gate::PolicyCache,
    target: &Target,
    request: &RequestInfo,
    q: &Query,
    headers: &HeaderMap,
    body: &Bytes,
    user: &UserInfo,
) -> ApiResult<()> {
    if !matches!(request.verb, Verb::Create | Verb::Update | Verb::Patch) {
        return Ok(());
    }
    let info = &target.info;
    let name = target.name.as_deref().unwrap_or("");
    let creates = request.verb == Verb::Update
        && target.part == Part::Main
        && info.strategy.allows_create_on_update()
        && fe
            .api
            .store
            .get(&target.key(), &target.namespace, name)
            .is_none();
    if creates {
        // A PUT that creates is a create, and needs that verb too (as kube-apiserver asks).
        policy.check(&fe.api.store, |policy| {
            gate::authorize(
                policy,
                &crate::auth::rbac::Attributes {
                    user,
                    verb: "create",
                    target: crate::auth::rbac::Target::Resource {
                        namespace: &target.namespace,
                        group: &info.group,
                        resource: &info.plural,
                        subresource: "",
                        name,
                    },
                },
            )
        })?;
    }
    match info.strategy.write_check(target.part) {
        None => Ok(()),
        Some(WriteCheck::Signer(verb)) => {
            let Some(csr) = fe.api.store.get(&target.key(), "", name) else {
                return Ok(());
            };
            let signer = csr
                .pointer("/spec/signerName")
                .and_then(Value::as_str)
                .unwrap_or("");
            policy.check(&fe.api.store, |policy| {
                gate::check_signer(policy, user, verb, signer, name)
            })
        }
        Some(WriteCheck::Escalation) => {
            let mut obj = if request.verb == Verb::Patch {
                let ct = header_str(headers, header::CONTENT_TYPE);
                let kind =
                    PatchType::from_content_type(ct, info.strategy.accepts_strategic_merge())?;
                let mut opts =
                    WriteOptions::from_query(q, header_str(headers, header::USER_AGENT), user)?;
                // Only to see what the patch makes: admission runs on the real write.
                opts.dry_run = true;
                opts.user = None;
                fe.api.patch(target, kind, body, &opts).await?.into_object()
            } else {
                decode_body(headers, body, &info.kind)?
            };
            if !target.namespace.is_empty()
                && let Some(o) = obj.as_object_mut()
                && let Some(meta) = o
                    .entry("metadata")
                    .or_insert_with(|| Value::Object(Default::default()))
                    .as_object_mut()
            {
                meta.insert("namespace".into(), Value::String(target.namespace.clone()));
            }
            policy.check(&fe.api.store, |policy| {
                gate::check_escalation(policy, user, &info.plural, &obj)
            })
        }
    }
}

fn watch_response(
    fe: &Frontend,
    t: Target,
    q: &Query,
    render: Render,
) -> ApiResult<Response<Body>> {
    let mut spec = crate::watch::spec_from_query(
        t,
        q,
        render.table.then_some(render.include),
        fe.default_watch_timeout,
    )?;
    spec.metadata_only = render.metadata_only;
    let rx = crate::watch::start(fe.api.clone(), spec, fe.shutdown.clone(), fe.bookmark_every);
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, Infallible>(Frame::data(b)), rx))
    });
    let mut r = Response::new(BodyExt::boxed_unsync(StreamBody::new(stream)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

//! certificates.k8s.io/v1: CertificateSigningRequests, as kube-apiserver's CSR strategy,
//! validation and admission (CertificateSubjectRestriction) treat them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use x509_parser::prelude::FromDer as _;

use crate::error::{ApiError, ApiResult, FieldError};
use crate::objects::subject;
use crate::resource::{Part, ResourceInfo, ResourceStrategy, Validation, WriteCheck};
use crate::table::{CellSource, PrinterColumn};
use crate::user::UserInfo;

/// The signer of client certificates for kube-apiserver.
const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// The group whose members may do anything: no CSR may ask kube-apiserver's signer for it.
const SYSTEM_MASTERS: &str = "system:masters";
/// The shortest certificate a CSR may ask for.
const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The conditions only approval may set (and that no write may remove).
const APPROVAL_CONDITIONS: [&str; 2] = ["Approved", "Denied"];
/// Conditions whose status may only be `True`.
const TRUE_ONLY: [&str; 3] = ["Approved", "Denied", "Failed"];
/// The key usages a CSR may ask for (`spec.usages`).
const USAGES: [&str; 23] = [
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// CertificateSigningRequests: the requester recorded at creation, the spec fixed from then on,
/// approval and status writes checked against the signer, and no client certificate for
/// `system:masters` from kube-apiserver's own signer.
#[derive(Debug)]
pub struct CertificateSigningRequests;

impl ResourceStrategy for CertificateSigningRequests {
    fn field_selectors(&self) -> &'static [&'static str] {
        &["spec.signerName"]
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::path("Age", "date", ".metadata.creationTimestamp"),
            PrinterColumn::path("SignerName", "string", ".spec.signerName"),
            PrinterColumn::path("Requestor", "string", ".spec.username"),
            PrinterColumn::computed(
                "RequestedDuration",
                CellSource::Seconds(vec!["spec", "expirationSeconds"]),
            ),
            PrinterColumn::computed("Condition", CellSource::TrueConditions),
        ]
    }

    /// The requester's name, uid, groups and extra replace whatever the client put in the spec
    /// (an empty uid or extra is left out, as Kubernetes' omitempty does), and the status is
    /// empty: no one creates an approved request.
    fn record_requester(&self, obj: &mut Value, user: &UserInfo) {
        if let Some(Value::Object(spec)) = obj.get_mut("spec") {
            spec.insert("username".into(), json!(user.name));
            spec.insert("groups".into(), json!(user.groups));
            spec.remove("uid");
            spec.remove("extra");
            if !user.uid.is_empty() {
                spec.insert("uid".into(), json!(user.uid));
            }
            if !user.extra.is_empty() {
                spec.insert("extra".into(), json!(user.extra));
            }
        }
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({}));
        }
    }

    /// A CSR's spec is its requester's alone; its status is written by approvers
    /// (conditions) and signers (the certificate), each through their own subresource.
    fn reset_fields(&self, _info: &ResourceInfo, part: Part) -> &'static [&'static [&'static str]] {
        match part {
            Part::Main => &[&["spec"], &["status"]],
            Part::Status => &[&["spec"], &["status", "conditions"]],
            Part::Approval => &[&["spec"], &["status", "certificate"]],
            _ => &[],
        }
    }

    /// The spec, requester included, never changes after creation. Approval changes the
    /// conditions only (and the metadata it is sent with); status writes anything of the status.
    /// New conditions are stamped with when they were written, and keep when they last changed.
    fn prepare_for_update(&self, cur: &Value, next: &mut Value, part: Part) {
        let Some(o) = next.as_object_mut() else {
            return;
        };
        match cur.get("spec") {
            Some(spec) => o.insert("spec".into(), spec.clone()),
            None => o.remove("spec"),
        };
        if part == Part::Approval {
            let conditions = o.get("status").and_then(|s| s.get("conditions")).cloned();
            let mut status = cur.get("status").cloned().unwrap_or_else(|| json!({}));
            if let Some(s) = status.as_object_mut() {
                match conditions {
                    Some(c) => s.insert("conditions".into(), c),
                    None => s.remove("conditions"),
                };
            }
            o.insert("status".into(), status);
        }
        if matches!(part, Part::Approval | Part::Status) {
            stamp_conditions(cur, next, &crate::meta::now_rfc3339());
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        match check.old {
            // The spec cannot change after creation, so it is checked once, when created.
            None => validate_spec(obj, &mut check.errors),
            Some(old) => validate_update(obj, old, check.part, &mut check.errors),
        }
        validate_conditions(obj, check.old, &mut check.errors);
        validate_certificate(obj, check.old, &mut check.errors);
    }

    /// kube-apiserver's CertificateSubjectRestriction: a client certificate from its own signer
    /// may not name `system:masters`, whoever asks.
    fn admit_create(&self, info: &ResourceInfo, obj: &Value) -> ApiResult<()> {
        if obj.pointer("/spec/signerName").and_then(Value::as_str) != Some(CLIENT_SIGNER) {
            return Ok(());
        }
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let forbidden = |why: String| ApiError::Forbidden {
            subject: subject(info, name),
            message: format!(
                "{}.{} {name:?} is forbidden: {why}",
                info.plural, info.group
            ),
            cause: None,
        };
        let request = obj
            .pointer("/spec/request")
            .and_then(Value::as_str)
            .unwrap_or("");
        let organizations = requested_organizations(request)
            .map_err(|e| forbidden(format!("failed to parse CSR: {e}")))?;
        if organizations.iter().any(|o| o == SYSTEM_MASTERS) {
            return Err(forbidden(format!(
                "use of {CLIENT_SIGNER} signer with {SYSTEM_MASTERS} group is not allowed"
            )));
        }
        Ok(())
    }

    /// Approving needs `approve`, and writing status (the certificate) `sign`, on the signer.
    fn write_check(&self, part: Part) -> Option<WriteCheck> {
        match part {
            Part::Approval => Some(WriteCheck::Signer("approve")),
            Part::Status => Some(WriteCheck::Signer("sign")),
            _ => None,
        }
    }
}

fn conditions(obj: &Value) -> &[Value] {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn condition_type(c: &Value) -> &str {
    c.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Conditions default to status `True`; each gets `lastUpdateTime` (now) and
/// `lastTransitionTime` (when a condition of its type and status was first there, else now)
/// unless the writer set them.
fn stamp_conditions(cur: &Value, next: &mut Value, now: &str) {
    let old = conditions(cur).to_vec();
    let Some(list) = next
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in list.iter_mut().filter_map(Value::as_object_mut) {
        let status = c.get("status").and_then(Value::as_str).unwrap_or("");
        if status.is_empty() {
            c.insert("status".into(), json!("True"));
        }
        let unset = |v: Option<&Value>| v.and_then(Value::as_str).is_none_or(str::is_empty);
        if unset(c.get("lastUpdateTime")) {
            c.insert("lastUpdateTime".into(), json!(now));
        }
        if unset(c.get("lastTransitionTime")) {
            let since = old
                .iter()
                .find(|o| {
                    o.get("type") == c.get("type")
                        && o.get("status") == c.get("status")
                        && !unset(o.get("lastTransitionTime"))
                })
                .and_then(|o| o.get("lastTransitionTime").cloned())
                .unwrap_or_else(|| json!(now));
            c.insert("lastTransitionTime".into(), since);
        }
    }
}

/// The spec of a new CSR: a signed PKCS#10 request, usages, a signer and a lifetime of at least
/// ten minutes.
fn validate_spec(obj: &Value, errors: &mut Vec<FieldError>) {
    let request = obj.pointer("/spec/request");
    match request.and_then(Value::as_str) {
        None | Some("") => errors.push(FieldError::invalid(
            "spec.request",
            &json!(""),
            "PEM block type must be CERTIFICATE REQUEST",
        )),
        Some(b64) => {
            if let Err(e) = check_request(b64) {
                errors.push(FieldError::invalid("spec.request", &json!(b64), e));
            }
        }
    }
    let usages = obj
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if usages.is_empty() {
        errors.push(FieldError::required("spec.usages", ""));
    }
    let allowed: Vec<Value> = {
        let mut sorted = USAGES.to_vec();
        sorted.sort_unstable();
        sorted.into_iter().map(|u| json!(u)).collect()
    };
    for (i, usage) in usages.iter().enumerate() {
        if !usage.as_str().is_some_and(|u| USAGES.contains(&u)) {
            errors.push(FieldError::not_supported(
                format!("spec.usages[{i}]"),
                usage,
                &allowed,
            ));
        }
        if usages[..i].contains(usage) {
            errors.push(FieldError::duplicate(format!("spec.usages[{i}]"), usage));
        }
    }
    let signer = obj
        .pointer("/spec/signerName")
        .and_then(Value::as_str)
        .unwrap_or("");
    validate_signer_name(signer, errors);
    if let Some(seconds) = obj
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_i64)
        && seconds < MIN_EXPIRATION_SECONDS
    {
        errors.push(FieldError::invalid(
            "spec.expirationSeconds",
            &json!(seconds),
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
}

/// A signer is `<domain>/<path>`, the domain of at least two DNS labels.
fn validate_signer_name(signer: &str, errors: &mut Vec<FieldError>) {
    const FIELD: &str = "spec.signerName";
    if signer.is_empty() {
        errors.push(FieldError::required(FIELD, ""));
        return;
    }
    if signer == "kubernetes.io/legacy-unknown" {
        errors.push(FieldError::invalid(
            FIELD,
            &json!(signer),
            "the legacy signerName is not allowed via this API version",
        ));
        return;
    }
    let Some((domain, _)) = signer.split_once('/').filter(|(_, p)| !p.contains('/')) else {
        errors.push(FieldError::invalid(
            FIELD,
            &json!(signer),
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return;
    };
    let labels: Vec<&str> = domain.split('.').collect();
    if let Some(bad) = labels.iter().find(|l| !is_dns_label(l)) {
        errors.push(FieldError::invalid(
            FIELD,
            &json!(domain),
            format!(
                "validating label {bad:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ),
        ));
    }
    if labels.len() < 2 {
        errors.push(FieldError::invalid(
            FIELD,
            &json!(domain),
            "should be a domain with at least two segments separated by dots",
        ));
    }
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The PKCS#10 request in `b64` (base64 of PEM), its signature checked.
fn check_request(b64: &str) -> Result<(), String> {
    let pem = STANDARD
        .decode(b64)
        .map_err(|_| "PEM block type must be CERTIFICATE REQUEST".to_string())?;
    let der = request_der(&pem)?;
    let (_, request) = x509_parser::certification_request::X509CertificationRequest::from_der(&der)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    request
        .verify_signature()
        .map_err(|_| "x509: signature verification failure".to_string())
}

/// The DER of the first PEM block, which must be a `CERTIFICATE REQUEST`.
fn request_der(pem: &[u8]) -> Result<Vec<u8>, String> {
    match x509_parser::pem::Pem::iter_from_buffer(pem).next() {
        Some(Ok(block)) if block.label == "CERTIFICATE REQUEST" => Ok(block.contents),
        _ => Err("PEM block type must be CERTIFICATE REQUEST".into()),
    }
}

/// The organizations (groups) the request in `b64` asks for.
fn requested_organizations(b64: &str) -> Result<Vec<String>, String> {
    let pem = STANDARD
        .decode(b64)
        .map_err(|_| "PEM block type must be CERTIFICATE REQUEST".to_string())?;
    let der = request_der(&pem)?;
    let (_, request) = x509_parser::certification_request::X509CertificationRequest::from_der(&der)
        .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    Ok(request
        .certification_request_info
        .subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_string)
        .collect())
}

/// What an update may not do: remove the approval or failure conditions, add or change
/// Approved/Denied other than through `/approval`, or set the certificate other than once
/// through `/status`.
fn validate_update(obj: &Value, old: &Value, part: Part, errors: &mut Vec<FieldError>) {
    let of_type = |v: &Value, t: &str| -> Vec<Value> {
        conditions(v)
            .iter()
            .filter(|c| condition_type(c) == t)
            .cloned()
            .collect()
    };
    for t in ["Approved", "Denied", "Failed"] {
        if of_type(obj, t).len() < of_type(old, t).len() {
            errors.push(FieldError::forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type {t:?}"),
            ));
        }
    }
    if part != Part::Approval {
        for t in APPROVAL_CONDITIONS {
            let (now, before) = (of_type(obj, t), of_type(old, t));
            if now.len() > before.len() {
                errors.push(FieldError::forbidden(
                    "status.conditions",
                    &format!("updates may not add a condition of type {t:?}"),
                ));
            } else if now.len() == before.len() && now != before {
                errors.push(FieldError::forbidden(
                    "status.conditions",
                    &format!("updates may not modify a condition of type {t:?}"),
                ));
            }
        }
    }
    let certificate = |v: &Value| {
        v.pointer("/status/certificate")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (now, before) = (certificate(obj), certificate(old));
    if now != before {
        if part != Part::Status {
            errors.push(FieldError::forbidden(
                "status.certificate",
                "updates may not set certificate content",
            ));
        } else if !before.is_empty() {
            errors.push(FieldError::forbidden(
                "status.certificate",
                "updates may not modify existing certificate content",
            ));
        }
    }
}

/// Conditions name a type, True is the only status of the approval and failure ones, a type is
/// there once, and Approved and Denied exclude each other; what the stored object already
/// breaks is tolerated.
fn validate_conditions(obj: &Value, old: Option<&Value>, errors: &mut Vec<FieldError>) {
    let list = conditions(obj);
    let old_list = old.map(conditions).unwrap_or_default();
    let had_type = |t: &str| old_list.iter().any(|c| condition_type(c) == t);
    let had_duplicates = old_list.iter().enumerate().any(|(i, c)| {
        old_list[..i]
            .iter()
            .any(|o| condition_type(o) == condition_type(c))
    });
    let had_both = had_type("Approved") && had_type("Denied");
    let (mut approved, mut denied) = (false, false);
    for (i, c) in list.iter().enumerate() {
        let kind = condition_type(c);
        if kind.is_empty() && !had_type("") {
            errors.push(FieldError::required(
                format!("status.conditions[{i}].type"),
                "",
            ));
        }
        let status = c.get("status").and_then(Value::as_str).unwrap_or("");
        let allowed: &[&str] = if TRUE_ONLY.contains(&kind) {
            &["True"]
        } else {
            &["False", "True", "Unknown"]
        };
        if status.is_empty() {
            errors.push(FieldError::required(
                format!("status.conditions[{i}].status"),
                "",
            ));
        } else if !allowed.contains(&status) {
            errors.push(FieldError::not_supported(
                format!("status.conditions[{i}].status"),
                &json!(status),
                &allowed.iter().map(|a| json!(a)).collect::<Vec<_>>(),
            ));
        }
        if !had_both {
            let conflicting = match kind {
                "Approved" => {
                    approved = true;
                    denied
                }
                "Denied" => {
                    denied = true;
                    approved
                }
                _ => false,
            };
            if conflicting {
                errors.push(FieldError::invalid(
                    "status.conditions",
                    &json!(kind),
                    "Approved and Denied conditions are mutually exclusive",
                ));
            }
        }
        if !had_duplicates && list[..i].iter().any(|o| condition_type(o) == kind) {
            errors.push(FieldError::duplicate(
                format!("status.conditions[{i}].type"),
                &json!(kind),
            ));
        }
    }
}

/// A certificate, once written, is PEM CERTIFICATE blocks only; one left as it was stored is
/// not checked again.
fn validate_certificate(obj: &Value, old: Option<&Value>, errors: &mut Vec<FieldError>) {
    let certificate = obj.pointer("/status/certificate").and_then(Value::as_str);
    let Some(b64) = certificate.filter(|c| !c.is_empty()) else {
        return;
    };
    if old.and_then(|o| o.pointer("/status/certificate").and_then(Value::as_str)) == Some(b64) {
        return;
    }
    if let Err(e) = check_certificate(b64) {
        errors.push(FieldError::invalid(
            "status.certificate",
            &json!("<certificate data>"),
            e,
        ));
    }
}

fn check_certificate(b64: &str) -> Result<(), String> {
    let none = || "must contain at least one CERTIFICATE PEM block".to_string();
    let pem = STANDARD.decode(b64).map_err(|_| none())?;
    let mut blocks = 0;
    for block in x509_parser::pem::Pem::iter_from_buffer(&pem) {
        let Ok(block) = block else {
            break;
        };
        if block.label != "CERTIFICATE" {
            return Err(format!(
                "only CERTIFICATE PEM blocks are allowed, found {:?}",
                block.label
            ));
        }
        x509_parser::parse_x509_certificate(&block.contents)
            .map_err(|e| format!("x509: malformed certificate: {e}"))?;
        blocks += 1;
    }
    if blocks == 0 {
        return Err(none());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PEM CSR (base64, as `spec.request` holds it) for `cn` in `groups`.
    fn request(cn: &str, groups: &[&str]) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        for g in groups {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *g);
        }
        let csr = params.serialize_request(&key).unwrap();
        STANDARD.encode(csr.pem().unwrap())
    }

    fn csr(spec: Value) -> Value {
        json!({"metadata": {"name": "c"}, "spec": spec, "status": {}})
    }

    fn errors_of(obj: &Value, old: Option<&Value>, part: Part) -> Vec<String> {
        let info = crate::registry::Registry::with_builtins()
            .lookup("certificates.k8s.io", "v1", "certificatesigningrequests")
            .unwrap();
        let mut check = Validation {
            info: &info,
            old,
            part,
            errors: Vec::new(),
        };
        CertificateSigningRequests.validate(&mut obj.clone(), &mut check);
        check.errors.into_iter().map(|e| e.message).collect()
    }

    fn valid_spec() -> Value {
        json!({"request": request("agent", &["team"]), "signerName": CLIENT_SIGNER,
            "usages": ["digital signature", "client auth"], "expirationSeconds": 3600})
    }

    #[test]
    fn a_new_csr_needs_a_signed_request_usages_a_signer_and_ten_minutes() {
        assert_eq!(
            errors_of(&csr(valid_spec()), None, Part::Main),
            Vec::<String>::new()
        );
        let mut short = valid_spec();
        short["expirationSeconds"] = json!(599);
        assert_eq!(
            errors_of(&csr(short), None, Part::Main),
            [
                "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"
            ]
        );
        let mut bad = valid_spec();
        bad["request"] = json!(STANDARD.encode("not a request"));
        bad["usages"] = json!(["client auth", "client auth", "flying"]);
        bad["signerName"] = json!("signer");
        let found = errors_of(&csr(bad), None, Part::Main);
        assert!(
            found[0].starts_with("spec.request: Invalid value: "),
            "{found:?}"
        );
        assert!(found[0].ends_with(": PEM block type must be CERTIFICATE REQUEST"));
        assert!(
            found[1].starts_with("spec.usages[1]: Duplicate value"),
            "{found:?}"
        );
        assert!(
            found[2].starts_with("spec.usages[2]: Unsupported value: \"flying\""),
            "{found:?}"
        );
        assert_eq!(
            found[3],
            "spec.signerName: Invalid value: \"signer\": must be a fully qualified domain and path of the form 'example.com/signer-name'"
        );
        let mut tampered = valid_spec();
        let other = STANDARD
            .decode(request("agent", &["system:masters"]))
            .unwrap();
        let mut pem = String::from_utf8(other).unwrap();
        // One character of the signed subject changed: the signature no longer holds.
        let at = pem.find('\n').unwrap() + 40;
        let flipped = if &pem[at..at + 1] == "A" { "B" } else { "A" };
        pem.replace_range(at..at + 1, flipped);
        tampered["request"] = json!(STANDARD.encode(pem));
        assert_eq!(errors_of(&csr(tampered), None, Part::Main).len(), 1);
    }

    fn with_conditions(conditions: Value) -> Value {
        let mut c = csr(valid_spec());
        c["status"] = json!({"conditions": conditions});
        c
    }

    #[test]
    fn approved_and_denied_exclude_each_other_unless_already_stored_so() {
        let old = with_conditions(json!([{"type": "Denied", "status": "True"}]));
        let both = with_conditions(
            json!([{"type": "Denied", "status": "True"}, {"type": "Approved", "status": "True"}]),
        );
        assert_eq!(
            errors_of(&both, Some(&old), Part::Approval),
            [
                "status.conditions: Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive"
            ]
        );
        assert_eq!(
            errors_of(&both, Some(&both), Part::Approval),
            Vec::<String>::new(),
            "what is stored already is tolerated"
        );
    }

    #[test]
    fn only_approval_sets_approval_conditions_and_nothing_removes_them() {
        let pending = with_conditions(json!([]));
        let approved = with_conditions(json!([{"type": "Approved", "status": "True"}]));
        assert!(errors_of(&approved, Some(&pending), Part::Approval).is_empty());
        assert_eq!(
            errors_of(&approved, Some(&pending), Part::Status),
            ["status.conditions: Forbidden: updates may not add a condition of type \"Approved\""]
        );
        assert_eq!(
            errors_of(&pending, Some(&approved), Part::Approval),
            [
                "status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""
            ]
        );
        let failed = with_conditions(json!([{"type": "Failed", "status": "False"}]));
        assert_eq!(
            errors_of(&failed, Some(&pending), Part::Status),
            [
                "status.conditions[0].status: Unsupported value: \"False\": supported values: \"True\""
            ]
        );
    }

    fn issued() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::default()
            .self_signed(&key)
            .unwrap();
        STANDARD.encode(cert.pem())
    }

    #[test]
    fn a_certificate_is_pem_written_once_through_status() {
        let pending = with_conditions(json!([{"type": "Approved", "status": "True"}]));
        let mut signed = pending.clone();
        signed["status"]["certificate"] = json!(issued());
        assert!(errors_of(&signed, Some(&pending), Part::Status).is_empty());
        assert_eq!(
            errors_of(&signed, Some(&pending), Part::Approval),
            ["status.certificate: Forbidden: updates may not set certificate content"]
        );
        let mut again = signed.clone();
        again["status"]["certificate"] = json!(issued());
        assert_eq!(
            errors_of(&again, Some(&signed), Part::Status),
            ["status.certificate: Forbidden: updates may not modify existing certificate content"]
        );
        let mut foo = pending.clone();
        foo["status"]["certificate"] = json!("Zm9v");
        assert_eq!(
            errors_of(&foo, Some(&pending), Part::Status),
            [
                "status.certificate: Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block"
            ]
        );
    }

    #[test]
    fn kube_apiservers_signer_never_issues_for_system_masters() {
        let info = crate::registry::Registry::with_builtins()
            .lookup("certificates.k8s.io", "v1", "certificatesigningrequests")
            .unwrap();
        let mut masters = valid_spec();
        masters["request"] = json!(request("root", &["team", SYSTEM_MASTERS]));
        let err = CertificateSigningRequests
            .admit_create(&info, &csr(masters.clone()))
            .unwrap_err();
        assert_eq!(err.code(), 403);
        assert_eq!(
            err.to_string(),
            "certificatesigningrequests.certificates.k8s.io \"c\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
        );
        masters["signerName"] = json!("example.com/other");
        assert!(
            CertificateSigningRequests
                .admit_create(&info, &csr(masters))
                .is_ok(),
            "other signers judge for themselves"
        );
        assert!(
            CertificateSigningRequests
                .admit_create(&info, &csr(valid_spec()))
                .is_ok()
        );
    }

    #[test]
    fn approval_stamps_new_conditions_and_keeps_when_they_last_changed() {
        let old = with_conditions(
            json!([{"type": "Approved", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}]),
        );
        let mut next =
            with_conditions(json!([{"type": "Approved"}, {"type": "Failed", "status": "True"}]));
        CertificateSigningRequests.prepare_for_update(&old, &mut next, Part::Status);
        let conditions = conditions(&next);
        assert_eq!(conditions[0]["status"], json!("True"));
        assert_eq!(
            conditions[0]["lastTransitionTime"],
            json!("2020-01-01T00:00:00Z")
        );
        assert!(conditions[1]["lastTransitionTime"].is_string());
        assert!(conditions[1]["lastUpdateTime"].is_string());
    }
}

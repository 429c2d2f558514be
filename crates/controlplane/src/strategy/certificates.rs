//! certificates.k8s.io/v1: CertificateSigningRequests, as kube-apiserver's CSR strategy and
//! admission treat them.

use serde_json::{Value, json};

use super::{ResourceStrategy, Validation, WriteCheck};
use crate::api::UserInfo;
use crate::error::FieldError;
use crate::objects::Part;
use crate::registry::{CellSource, PrinterColumn, ResourceInfo};

/// CertificateSigningRequests: the requester recorded at creation, the spec fixed from then on,
/// and approval and status writes checked against the signer.
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
    /// (an empty uid or extra is left out, as Kubernetes' omitempty does), and no status is
    /// kept.
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
            o.remove("status");
        }
    }

    /// The spec, requester included, never changes after creation: every update keeps the
    /// stored spec whatever it was sent.
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

    fn prepare_for_update(&self, cur: &Value, next: &mut Value, _part: Part) {
        if let Some(o) = next.as_object_mut() {
            match cur.get("spec") {
                Some(spec) => o.insert("spec".into(), spec.clone()),
                None => o.remove("spec"),
            };
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        for (pointer, field) in [
            ("/spec/request", "spec.request"),
            ("/spec/signerName", "spec.signerName"),
        ] {
            if obj.pointer(pointer).and_then(Value::as_str).is_none() {
                check.errors.push(FieldError::required(field, ""));
            }
        }
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

//! The signer for `kubernetes.io/kube-apiserver-client`: approved CSRs of that signer get a
//! client certificate from the control plane's CA in `status.certificate`, for the lifetime they
//! ask for (`spec.expirationSeconds`) up to the control plane's `--cluster-signing-duration`
//! (kube-controller-manager's default, one year, unless the builder sets another). Denied or
//! failed CSRs are never signed; CSRs for other signers are left to their owners.

use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::sync::broadcast::error::RecvError;

use super::ca::{CertificateAuthority, DEFAULT_CLIENT_SECONDS, check_client_usages};
use crate::api::{ApiServer, Target, WriteOptions};
use crate::error::ApiError;
use crate::meta::now_rfc3339;
use crate::resource::Part;

/// The signer this control plane owns.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
const KEY: &str = "certificates.k8s.io/certificatesigningrequests";

/// What to do with a CSR.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Skip,
    /// Sign the PEM request for this many seconds (None: the default lifetime).
    Sign {
        request_pem: String,
        expiration_seconds: Option<i64>,
    },
    /// Mark the CSR Failed with this message.
    Fail(String),
}

fn has_condition(csr: &Value, kind: &str) -> bool {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str).unwrap_or("True") == "True"
            })
        })
}

/// Decides about one CSR (pure).
pub fn decide(csr: &Value) -> Decision {
    if csr.pointer("/spec/signerName").and_then(Value::as_str) != Some(CLIENT_SIGNER)
        || !has_condition(csr, "Approved")
        || has_condition(csr, "Denied")
        || has_condition(csr, "Failed")
        || csr
            .pointer("/status/certificate")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty())
    {
        return Decision::Skip;
    }
    let usages: Vec<String> = csr
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|u| {
            u.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if let Err(e) = check_client_usages(&usages) {
        return Decision::Fail(e.to_string());
    }
    let request = csr
        .pointer("/spec/request")
        .and_then(Value::as_str)
        .unwrap_or("");
    let Some(pem) = base64::engine::general_purpose::STANDARD
        .decode(request)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
    else {
        return Decision::Fail("spec.request is not base64-encoded PEM".into());
    };
    Decision::Sign {
        request_pem: pem,
        expiration_seconds: csr
            .pointer("/spec/expirationSeconds")
            .and_then(Value::as_i64),
    }
}

/// Runs until shutdown, signing what [`decide`] says to.
/// `max_seconds` caps every certificate's lifetime (`--cluster-signing-duration`); `None` caps it
/// at kube-controller-manager's default, [`DEFAULT_CLIENT_SECONDS`], so that a CSR asking for
/// more gets one year, as from kube-apiserver.
pub async fn run(
    api: Arc<ApiServer>,
    ca: Arc<CertificateAuthority>,
    max_seconds: Option<i64>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut rx = api.store.subscribe_all();
    let signer = Arc::new(Signer {
        api,
        ca,
        max_seconds: max_seconds.unwrap_or(DEFAULT_CLIENT_SECONDS),
        slots: Arc::new(Semaphore::new(SIGNING_AT_ONCE)),
    });
    resync(&signer).await;
    loop {
        tokio::select! {
            r = rx.recv() => match r {
                Ok(e) if &*e.key == KEY => start(&signer, e.decode()).await,
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => resync(&signer).await,
                Err(RecvError::Closed) => return,
            },
            _ = shutdown.changed() => return,
        }
    }
}

/// How many CSRs are signed at once. Each waits for its status write to be stored, and one at a
/// time a hub under a heavy write load signed at that write's latency: a few a second, while
/// thousands of joining clusters waited for their certificates.
const SIGNING_AT_ONCE: usize = 32;

/// What signing needs: where CSRs live, the CA and the lifetime cap, and the places for CSRs
/// being signed.
struct Signer {
    api: Arc<ApiServer>,
    ca: Arc<CertificateAuthority>,
    max_seconds: i64,
    slots: Arc<Semaphore>,
}

async fn resync(signer: &Arc<Signer>) {
    let (_, csrs) = signer.api.store.list(KEY, None, None);
    for c in csrs {
        start(signer, c.as_ref().clone()).await;
    }
}

/// Signs (or fails) `csr` beside the others being signed, once a place is free; a CSR with
/// nothing to do takes no place. The same CSR handled twice at once is signed once: the second
/// status write conflicts and is dropped.
async fn start(signer: &Arc<Signer>, csr: Value) {
    let decision = decide(&csr);
    if matches!(decision, Decision::Skip) {
        return;
    }
    let Ok(place) = signer.slots.clone().acquire_owned().await else {
        return;
    };
    let signer = signer.clone();
    tokio::spawn(async move {
        handle(&signer, &csr, decision).await;
        drop(place);
    });
}

/// Carries out `decision`, what [`decide`] made of `csr`.
async fn handle(signer: &Signer, csr: &Value, decision: Decision) {
    let (api, ca) = (&signer.api, &signer.ca);
    let name = csr
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut next = csr.clone();
    match decision {
        Decision::Skip => return,
        Decision::Sign {
            request_pem,
            expiration_seconds,
        } => match ca.sign_client_csr(
            &request_pem,
            expiration_seconds,
            Some(signer.max_seconds),
            time::OffsetDateTime::now_utc(),
        ) {
            Ok(cert) => {
                let Some(status) = status_mut(&mut next) else {
                    return;
                };
                let encoded = base64::engine::general_purpose::STANDARD.encode(cert);
                status.insert("certificate".into(), json!(encoded));
                tracing::info!(csr = name, "signed client certificate");
            }
            Err(e) => fail(&mut next, &e.to_string()),
        },
        Decision::Fail(msg) => fail(&mut next, &msg),
    }
    let Some(info) = api.registry.by_storage_key(KEY) else {
        return;
    };
    let target = Target {
        info,
        namespace: String::new(),
        name: Some(name.to_string()),
        part: Part::Status,
    };
    // Recorded as kube-controller-manager's signer writes it.
    let opts = WriteOptions {
        field_manager: Some("kube-controller-manager".into()),
        ..WriteOptions::default()
    };
    match api.update(&target, next, &opts).await {
        Ok(_) | Err(ApiError::NotFound(_)) => {}
        // A newer version is on its way as an event; it is handled then.
        Err(ApiError::Conflict(_)) => {}
        Err(e) => tracing::warn!(csr = name, error = %e, "cannot write CSR status"),
    }
}

fn fail(csr: &mut Value, message: &str) {
    let name = csr
        .pointer("/metadata/name")
        .and_then(|n| n.as_str())
        .unwrap_or("")
        .to_string();
    tracing::info!(csr = name, reason = message, "CSR not signed");
    let cond = json!({"type": "Failed", "status": "True", "reason": "SignerValidationFailure",
        "message": message, "lastUpdateTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()});
    let Some(status) = status_mut(csr) else {
        return;
    };
    match status.get_mut("conditions").and_then(Value::as_array_mut) {
        Some(cs) => cs.push(cond),
        None => {
            status.insert("conditions".into(), json!([cond]));
        }
    }
}

/// The CSR's status as an object (created when absent); None for a malformed CSR.
fn status_mut(csr: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    let status = csr
        .as_object_mut()?
        .entry("status")
        .or_insert_with(|| json!({}));
    if status.is_null() {
        *status = json!({});
    }
    status.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr(signer: &str, conditions: Value, usages: Value) -> Value {
        json!({"metadata": {"name": "c"}, "spec": {"signerName": signer, "usages": usages,
            "request": base64::engine::general_purpose::STANDARD.encode("PEM"), "expirationSeconds": 900},
            "status": {"conditions": conditions}})
    }

    fn approved() -> Value {
        json!([{"type": "Approved", "status": "True"}])
    }

    #[test]
    fn approved_client_csr_is_signed_with_its_expiration() {
        assert_eq!(
            decide(&csr(CLIENT_SIGNER, approved(), json!(["client auth"]))),
            Decision::Sign {
                request_pem: "PEM".into(),
                expiration_seconds: Some(900)
            }
        );
    }

    #[test]
    fn pending_denied_failed_and_foreign_csrs_are_not_signed() {
        let usages = json!(["client auth"]);
        assert_eq!(
            decide(&csr(CLIENT_SIGNER, json!([]), usages.clone())),
            Decision::Skip
        );
        let denied =
            json!([{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]);
        assert_eq!(
            decide(&csr(CLIENT_SIGNER, denied, usages.clone())),
            Decision::Skip
        );
        let failed =
            json!([{"type": "Approved", "status": "True"}, {"type": "Failed", "status": "True"}]);
        assert_eq!(
            decide(&csr(CLIENT_SIGNER, failed, usages.clone())),
            Decision::Skip
        );
        assert_eq!(
            decide(&csr("example.com/other", approved(), usages)),
            Decision::Skip
        );
    }

    #[test]
    fn server_usages_fail_the_csr() {
        assert!(matches!(
            decide(&csr(
                CLIENT_SIGNER,
                approved(),
                json!(["client auth", "server auth"])
            )),
            Decision::Fail(_)
        ));
    }
}

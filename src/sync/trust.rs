//! The signature a FleetSync requires (`spec.verify`), with the trusted keys read from its
//! Secret, and what a refused commit comes to: the sync stalls with reason `SignatureInvalid`
//! and the commit in force stays. Verifying itself is [`crate::source`]'s.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, ResourceExt};

use super::status::{Commit, Outcome};
use crate::api::fleet::{FleetSync, SYSTEM_NAMESPACE, VerifyMode};
use crate::source::{Keys, SourceError, TrustedKeys, Verification};

/// The verification `fleetsync` asks for, keys read from its Secret; `None` when it asks for
/// none. A Secret that is missing or holds no valid key refuses every commit (the sync
/// stalls); one that cannot be read now is retried.
///
/// `pinned`: the commit in force is being read again after a restart. In `Tag` mode the tag, not
/// the commit, carries the signature, so such a commit cannot be checked on its own and is not
/// read again: the next fetch verifies the tag afresh.
pub async fn verification(
    client: &Client,
    fleetsync: &FleetSync,
    pinned: bool,
) -> Result<Option<Verification>, Outcome> {
    let Some(verify) = &fleetsync.spec.verify else {
        return Ok(None);
    };
    if pinned && verify.mode == VerifyMode::Tag {
        return Err(refused(
            None,
            "the commit in force is checked again through its signed tag at the next fetch".into(),
        ));
    }
    let namespace = fleetsync
        .namespace()
        .unwrap_or_else(|| SYSTEM_NAMESPACE.into());
    let name = &verify.secret_ref.name;
    let origin = format!("Secret {namespace}/{name}");
    let secret = Api::<Secret>::namespaced(client.clone(), &namespace)
        .get_opt(name)
        .await
        .map_err(|err| Outcome::Failed {
            commit: None,
            message: format!("cannot read the trusted keys from {origin}: {err}"),
        })?
        .ok_or_else(|| refused(None, format!("the trusted keys' {origin} does not exist")))?;
    let data = secret.data.unwrap_or_default();
    let keys = TrustedKeys::from_secret_data(
        &origin,
        data.iter()
            .map(|(key, value)| (key.as_str(), value.0.as_slice())),
    )
    .map_err(|err| refused(None, err.to_string()))?;
    Ok(Some(Verification {
        mode: verify.mode,
        keys: Keys::Loaded(Arc::new(keys)),
    }))
}

/// The outcome of a source error that concerns trust, or `None` for any other.
pub fn refusal(err: &SourceError) -> Option<Outcome> {
    match err {
        SourceError::Signature { error, .. } => Some(refused(
            Some(Commit {
                sha: error.commit().to_string(),
                subject: String::new(),
                signer: None,
            }),
            error.to_string(),
        )),
        SourceError::Keys(err) => Some(refused(None, err.to_string())),
        _ => None,
    }
}

fn refused(commit: Option<Commit>, problem: String) -> Outcome {
    Outcome::SignatureInvalid { commit, problem }
}

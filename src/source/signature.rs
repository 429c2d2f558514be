//! Whether a commit (or the annotated tag naming it) is signed by a trusted key, read from git's
//! objects alone: the signature and the bytes it signs come out of the object (git2), and are
//! verified with `ssh-key` (SSH signatures, namespace `git`) or `pgp` (OpenPGP). Nothing shells
//! out to git, ssh-keygen or gpg.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use git2::{ObjectType, Oid, Repository};
use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey, SignedPublicSubKey};
use pgp::packet::{Signature, SignatureType};
use pgp::types::KeyDetails;
use ssh_key::SshSig;

use super::keys::{GIT_NAMESPACE, KeysError, Signer, TrustedKeys};
use crate::api::fleet::VerifyMode;

const SSH_BEGIN: &str = "-----BEGIN SSH SIGNATURE-----";
const PGP_BEGIN: &str = "-----BEGIN PGP SIGNATURE-----";
const X509_BEGIN: &str = "-----BEGIN SIGNED MESSAGE-----";

/// What a commit must be signed by before it is read.
#[derive(Clone, Debug)]
pub struct Verification {
    /// The commit's own signature (`HEAD`), or the annotated tag's that the ref names (`Tag`).
    pub mode: VerifyMode,
    pub keys: Keys,
}

/// Where the trusted keys are.
#[derive(Clone, Debug)]
pub enum Keys {
    /// A file, read when the source is (`--verify FILE`).
    File(PathBuf),
    /// Keys read already (a FleetSync's Secret).
    Loaded(Arc<TrustedKeys>),
}

impl Keys {
    pub(super) fn load(&self) -> Result<Arc<TrustedKeys>, KeysError> {
        match self {
            Keys::File(path) => TrustedKeys::read_file(path).map(Arc::new),
            Keys::Loaded(keys) => Ok(keys.clone()),
        }
    }
}

/// The git object a signature was checked on: a commit, or a tag and the commit it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signed {
    Commit(String),
    Tag { name: String, commit: String },
}

impl fmt::Display for Signed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Signed::Commit(sha) => write!(f, "commit {}", short(sha)),
            Signed::Tag { name, commit } => write!(f, "tag {name} (commit {})", short(commit)),
        }
    }
}

fn short(sha: &str) -> &str {
    sha.get(..7).unwrap_or(sha)
}

/// Why a commit is not applied: its signature, or the lack of one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("{object} is not signed")]
    Unsigned { object: Signed },
    #[error("{object} is signed with {signer}, which is not a trusted key")]
    Untrusted { object: Signed, signer: Box<Signer> },
    #[error("{object} has a signature by {signer} that does not verify: {reason}")]
    Invalid {
        object: Signed,
        signer: Box<Signer>,
        reason: String,
    },
    #[error("{object} has a signature that cannot be read: {reason}")]
    Unreadable { object: Signed, reason: String },
    #[error(
        "ref {git_ref} names commit {}, not an annotated tag; verify mode Tag needs a signed tag",
        short(commit)
    )]
    NotATag { git_ref: String, commit: String },
}

impl SignatureError {
    /// The full SHA of the commit that was refused.
    pub fn commit(&self) -> &str {
        match self {
            SignatureError::Unsigned { object }
            | SignatureError::Untrusted { object, .. }
            | SignatureError::Invalid { object, .. }
            | SignatureError::Unreadable { object, .. } => match object {
                Signed::Commit(sha) | Signed::Tag { commit: sha, .. } => sha,
            },
            SignatureError::NotATag { commit, .. } => commit,
        }
    }
}

/// Checks the signature that `verification` asks for on `object` (what `git_ref` resolved to,
/// before peeling to its commit); returns who signed.
pub(super) fn verify(
    repo: &Repository,
    object: &git2::Object<'_>,
    commit: Oid,
    git_ref: &str,
    mode: VerifyMode,
    keys: &TrustedKeys,
) -> Result<Signer, SignatureError> {
    match mode {
        VerifyMode::Head => {
            let signed = Signed::Commit(commit.to_string());
            let (signature, data) = match repo.extract_signature(&commit, None) {
                Ok((signature, data)) => (signature.to_vec(), data.to_vec()),
                Err(err) if err.code() == git2::ErrorCode::NotFound => {
                    return Err(SignatureError::Unsigned { object: signed });
                }
                Err(err) => {
                    return Err(SignatureError::Unreadable {
                        object: signed,
                        reason: err.message().to_string(),
                    });
                }
            };
            check(&signature, &data, keys, signed)
        }
        VerifyMode::Tag => {
            let not_a_tag = || SignatureError::NotATag {
                git_ref: git_ref.to_string(),
                commit: commit.to_string(),
            };
            let tag = object.as_tag().ok_or_else(not_a_tag)?;
            let signed = Signed::Tag {
                name: String::from_utf8_lossy(tag.name_bytes()).into_owned(),
                commit: commit.to_string(),
            };
            let unreadable = |err: git2::Error| SignatureError::Unreadable {
                object: signed.clone(),
                reason: err.message().to_string(),
            };
            let odb = repo.odb().map_err(unreadable)?;
            let raw = odb.read(tag.id()).map_err(unreadable)?;
            if raw.kind() != ObjectType::Tag {
                return Err(not_a_tag());
            }
            let Some((data, signature)) = split_tag(raw.data()) else {
                return Err(SignatureError::Unsigned { object: signed });
            };
            check(signature, data, keys, signed)
        }
    }
}

/// A tag object's signed part and its signature: git appends the signature to the message, so
/// it starts at the last line that opens one.
fn split_tag(raw: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut start = None;
    let mut offset = 0;
    for line in raw.split_inclusive(|b| *b == b'\n') {
        if [SSH_BEGIN, PGP_BEGIN, X509_BEGIN]
            .iter()
            .any(|begin| line.starts_with(begin.as_bytes()))
        {
            start = Some(offset);
        }
        offset += line.len();
    }
    start.map(|start| raw.split_at(start))
}

fn check(
    signature: &[u8],
    data: &[u8],
    keys: &TrustedKeys,
    object: Signed,
) -> Result<Signer, SignatureError> {
    let unreadable = |object: Signed, reason: String| SignatureError::Unreadable { object, reason };
    let Ok(text) = std::str::from_utf8(signature) else {
        return Err(unreadable(object, "the signature is not text".into()));
    };
    let text = text.trim_start();
    if text.starts_with(SSH_BEGIN) {
        check_ssh(text, data, keys, object)
    } else if text.starts_with(PGP_BEGIN) {
        check_pgp(text, data, keys, object)
    } else if text.starts_with(X509_BEGIN) {
        Err(unreadable(
            object,
            "x509 (gitsign, S/MIME) signatures are not supported; sign with SSH or OpenPGP".into(),
        ))
    } else {
        Err(unreadable(
            object,
            "neither an SSH nor an OpenPGP signature".into(),
        ))
    }
}

fn check_ssh(
    text: &str,
    data: &[u8],
    keys: &TrustedKeys,
    object: Signed,
) -> Result<Signer, SignatureError> {
    let signature = SshSig::from_pem(text).map_err(|err| SignatureError::Unreadable {
        object: object.clone(),
        reason: format!("SSH signature: {err}"),
    })?;
    let Some(trusted) = keys
        .ssh
        .iter()
        .find(|signer| signer.key.key_data() == signature.public_key())
    else {
        return Err(SignatureError::Untrusted {
            object,
            signer: Box::new(Signer::ssh(signature.public_key(), None)),
        });
    };
    let signer = Signer::ssh(signature.public_key(), Some(&trusted.principals));
    if signature.namespace() != GIT_NAMESPACE {
        return Err(SignatureError::Invalid {
            object,
            signer: Box::new(signer),
            reason: format!(
                "signed in namespace {:?}, not git's {GIT_NAMESPACE:?}",
                signature.namespace()
            ),
        });
    }
    match trusted.key.verify(GIT_NAMESPACE, data, &signature) {
        Ok(()) => Ok(signer),
        Err(err) => Err(SignatureError::Invalid {
            object,
            signer: Box::new(signer),
            reason: err.to_string(),
        }),
    }
}

fn check_pgp(
    text: &str,
    data: &[u8],
    keys: &TrustedKeys,
    object: Signed,
) -> Result<Signer, SignatureError> {
    let (signature, _) =
        DetachedSignature::from_string(text).map_err(|err| SignatureError::Unreadable {
            object: object.clone(),
            reason: format!("OpenPGP signature: {err}"),
        })?;
    let fingerprints = signature.signature.issuer_fingerprint();
    let key_ids = signature.signature.issuer_key_id();
    let issued = |key: &dyn KeyDetails| {
        let fingerprint = key.fingerprint();
        let key_id = key.legacy_key_id();
        fingerprints.iter().any(|f| **f == fingerprint) || key_ids.iter().any(|k| **k == key_id)
    };
    for trusted in &keys.pgp {
        let candidates = std::iter::once((&trusted.primary_key as &dyn Verifier, None)).chain(
            trusted
                .public_subkeys
                .iter()
                .map(|subkey| (&subkey.key as &dyn Verifier, Some(subkey))),
        );
        for (candidate, subkey) in candidates {
            if !issued(candidate.details()) {
                continue;
            }
            let signer = Signer::pgp(
                format!("{:X}", candidate.details().fingerprint()),
                Some(trusted),
            );
            if let Some(reason) = pgp_unusable(trusted, subkey, pgp::types::Timestamp::now()) {
                return Err(SignatureError::Invalid {
                    object,
                    signer: Box::new(signer),
                    reason,
                });
            }
            return match candidate.verify(&signature, data) {
                Ok(()) => Ok(signer),
                Err(reason) => Err(SignatureError::Invalid {
                    object,
                    signer: Box::new(signer),
                    reason,
                }),
            };
        }
    }
    let key = match (fingerprints.first(), key_ids.first()) {
        (Some(fingerprint), _) => format!("{fingerprint:X}"),
        (None, Some(key_id)) => key_id.to_string().to_ascii_uppercase(),
        (None, None) => "(the signature names no key)".to_string(),
    };
    Err(SignatureError::Untrusted {
        object,
        signer: Box::new(Signer::pgp(key, None)),
    })
}

/// Why the trusted key `key` (its `subkey`, when the signature names one) verifies nothing at
/// `now`, if it does not: it, or its primary key, was revoked (by a revocation it signed
/// itself), or expired (as its newest self-signature, or the subkey's newest binding, says).
fn pgp_unusable(
    key: &SignedPublicKey,
    subkey: Option<&SignedPublicSubKey>,
    now: pgp::types::Timestamp,
) -> Option<String> {
    let primary = &key.primary_key;
    fn revoked<'a>(
        signatures: &'a [Signature],
        verifies: &dyn Fn(&Signature) -> bool,
    ) -> Option<&'a Signature> {
        signatures.iter().find(|signature| {
            matches!(
                signature.typ(),
                Some(SignatureType::KeyRevocation | SignatureType::SubkeyRevocation)
            ) && verifies(signature)
        })
    }
    let why = |signature: &Signature| {
        signature
            .revocation_reason_string()
            .map(|reason| format!(" ({})", String::from_utf8_lossy(reason)))
            .unwrap_or_default()
    };
    if let Some(revocation) = revoked(&key.details.revocation_signatures, &|signature| {
        signature.verify_key(primary).is_ok()
    }) {
        return Some(format!(
            "the key was revoked{}: it verifies nothing",
            why(revocation)
        ));
    }
    // The newest self-signature says when the primary key expires.
    let certifications = key.details.users.iter().flat_map(|user| {
        user.signatures.iter().filter(|signature| {
            signature
                .verify_certification(primary, pgp::types::Tag::UserId, &user.id)
                .is_ok()
        })
    });
    let direct = key
        .details
        .direct_signatures
        .iter()
        .filter(|signature| signature.verify_key(primary).is_ok());
    let newest = certifications
        .chain(direct)
        .max_by_key(|signature| signature.created().map(|at| at.as_secs()));
    if let Some(expired) = expired(primary.created_at(), newest, now) {
        return Some(format!("the key expired on {expired}: it verifies nothing"));
    }
    let subkey = subkey?;
    if let Some(revocation) = revoked(&subkey.signatures, &|signature| {
        signature
            .verify_subkey_binding(primary, &subkey.key)
            .is_ok()
    }) {
        return Some(format!(
            "its subkey was revoked{}: it verifies nothing",
            why(revocation)
        ));
    }
    let binding = subkey
        .signatures
        .iter()
        .filter(|signature| {
            signature.typ() == Some(SignatureType::SubkeyBinding)
                && signature
                    .verify_subkey_binding(primary, &subkey.key)
                    .is_ok()
        })
        .max_by_key(|signature| signature.created().map(|at| at.as_secs()));
    expired(subkey.key.created_at(), binding, now)
        .map(|expired| format!("its subkey expired on {expired}: it verifies nothing"))
}

/// When a key created at `created` expired by `now`, as `signature` (its newest self-signature
/// or binding) says; `None` while it has not, or never does.
fn expired(
    created: pgp::types::Timestamp,
    signature: Option<&Signature>,
    now: pgp::types::Timestamp,
) -> Option<String> {
    let lifetime = signature?.key_expiration_time()?.as_secs();
    let expires = created.as_secs().checked_add(lifetime)?;
    if lifetime == 0 || expires > now.as_secs() {
        return None;
    }
    Some(
        k8s_openapi::jiff::Timestamp::from_second(i64::from(expires))
            .map(|at| at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_else(|_| expires.to_string()),
    )
}

/// A primary key or subkey a detached signature can be checked with.
trait Verifier {
    fn details(&self) -> &dyn KeyDetails;
    fn verify(&self, signature: &DetachedSignature, data: &[u8]) -> Result<(), String>;
}

impl<K: pgp::types::VerifyingKey + KeyDetails> Verifier for K {
    fn details(&self) -> &dyn KeyDetails {
        self
    }

    fn verify(&self, signature: &DetachedSignature, data: &[u8]) -> Result<(), String> {
        signature.verify(self, data).map_err(|err| err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tags_signature_starts_at_the_last_line_opening_one() {
        let raw = b"object 1\ntype commit\ntag v1\n\nrelease\n-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n";
        let (data, signature) = split_tag(raw).unwrap();
        assert_eq!(data, b"object 1\ntype commit\ntag v1\n\nrelease\n");
        assert!(signature.starts_with(SSH_BEGIN.as_bytes()));
        assert_eq!(
            split_tag(b"object 1\ntype commit\ntag v1\n\nrelease\n"),
            None
        );
    }
}

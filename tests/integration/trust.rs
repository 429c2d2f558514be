//! Git trust and speed. Signed commits: an SSH key and an OpenPGP key made by the test sign real
//! commits and tags (the bytes git2 says a commit signs, the signature where git puts it);
//! reading a source with a keys file takes only what a trusted key signed, `fleetform verify`
//! says so by its exit code, and a FleetSync that requires signatures never applies anything
//! else. Pushes: the receiver of `sync --webhook-addr` fetches at once for a push signed with the
//! FleetSync's token (GitHub, GitLab, generic HMAC), answers 401 to any other and counts it, and
//! folds a burst into one fetch.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use fleetform::api::fleet::{FleetSync, SYSTEM_NAMESPACE, VerifyMode};
use fleetform::api::vocabulary::{CONDITION_READY, CONDITION_STALLED};
use fleetform::source::{
    Keys, SignatureError, Signed, SourceError, SourceSpec, Verification, read,
};
use fleetform::sync::SyncConfig;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::PostParams;
use pgp::composed::{
    ArmorOptions, DetachedSignature, KeyType, SecretKeyParamsBuilder, SignedPublicKey,
    SignedSecretKey,
};
use pgp::crypto::hash::HashAlgorithm;
use pgp::packet::{RevocationCode, SignatureConfig, SignatureType, Subpacket, SubpacketData};
use pgp::types::{KeyDetails, Password, Timestamp};
use serde_json::json;
use ssh_key::rand_core::OsRng;
use ssh_key::{Algorithm, HashAlg, LineEnding, PrivateKey};
use support::{Cluster, wait_for};
use tokio_util::sync::CancellationToken;

/// A key that signs what git asks it to, as `git commit -S` would with it.
enum Key {
    Ssh(Box<PrivateKey>),
    Pgp(Box<SignedSecretKey>),
}

impl Key {
    fn ssh() -> Key {
        Key::Ssh(Box::new(
            PrivateKey::random(&mut OsRng, Algorithm::Ed25519).unwrap(),
        ))
    }

    fn pgp(user: &str) -> Key {
        Key::pgp_created(user, Timestamp::now())
    }

    fn pgp_created(user: &str, created: Timestamp) -> Key {
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(KeyType::Ed25519Legacy)
            .can_certify(true)
            .can_sign(true)
            .created_at(created)
            .primary_user_id(user.to_string());
        Key::Pgp(Box::new(params.build().unwrap().generate(OsRng).unwrap()))
    }

    /// An OpenPGP key made two days ago that expired after one, as its newest self-signature
    /// says.
    fn pgp_expired(user: &str) -> Key {
        let two_days_ago = Timestamp::from_secs(Timestamp::now().as_secs() - 2 * 86_400);
        let Key::Pgp(mut key) = Key::pgp_created(user, two_days_ago) else {
            unreachable!()
        };
        let expiry = SubpacketData::KeyExpirationTime(pgp::types::Duration::from_secs(86_400));
        let signature = key.self_signed(SignatureType::Key, expiry);
        key.details.direct_signatures.push(signature);
        Key::Pgp(key)
    }

    /// An OpenPGP key its holder revoked.
    fn pgp_revoked(user: &str) -> Key {
        let Key::Pgp(mut key) = Key::pgp(user) else {
            unreachable!()
        };
        let reason =
            SubpacketData::RevocationReason(RevocationCode::KeyCompromised, "leaked".into());
        let signature = key.self_signed(SignatureType::KeyRevocation, reason);
        key.details.revocation_signatures.push(signature);
        Key::Pgp(key)
    }

    /// A detached signature of `data`, armored, as git stores it.
    fn sign(&self, data: &[u8]) -> String {
        match self {
            Key::Ssh(key) => key
                .sign("git", HashAlg::Sha512, data)
                .unwrap()
                .to_pem(LineEnding::LF)
                .unwrap(),
            Key::Pgp(key) => DetachedSignature::sign_binary_data(
                OsRng,
                &key.primary_key,
                &Password::empty(),
                HashAlgorithm::Sha256,
                data,
            )
            .unwrap()
            .to_armored_string(ArmorOptions::default())
            .unwrap(),
        }
    }

    /// The line or block a keys file trusts this key with.
    fn trusted(&self, principal: &str) -> String {
        match self {
            Key::Ssh(key) => format!("{principal} {}\n", key.public_key().to_openssh().unwrap()),
            Key::Pgp(key) => SignedPublicKey::from(key.as_ref().clone())
                .to_armored_string(ArmorOptions::default())
                .unwrap(),
        }
    }

    /// How fleetform names the key: `SHA256:…` or the OpenPGP fingerprint.
    fn id(&self) -> String {
        match self {
            Key::Ssh(key) => key.public_key().fingerprint(HashAlg::Sha256).to_string(),
            Key::Pgp(key) => format!("{:X}", key.fingerprint()),
        }
    }
}

/// A signature of an OpenPGP key over itself.
trait SelfSigned {
    /// A direct-key signature or revocation of `typ`, made now, that says `what`.
    fn self_signed(&self, typ: SignatureType, what: SubpacketData) -> pgp::packet::Signature;
}

impl SelfSigned for SignedSecretKey {
    fn self_signed(&self, typ: SignatureType, what: SubpacketData) -> pgp::packet::Signature {
        let mut config = SignatureConfig::from_key(OsRng, &self.primary_key, typ).unwrap();
        config.hashed_subpackets = vec![
            Subpacket::regular(SubpacketData::SignatureCreationTime(Timestamp::now())).unwrap(),
            Subpacket::regular(SubpacketData::IssuerFingerprint(self.fingerprint())).unwrap(),
            Subpacket::regular(what).unwrap(),
        ];
        config
            .sign_key(
                &self.primary_key,
                &Password::empty(),
                self.primary_key.public_key(),
            )
            .unwrap()
    }
}

/// The example fleet in a new repository, committed unsigned on `main`.
struct Repo {
    dir: tempfile::TempDir,
    repo: git2::Repository,
}

impl Repo {
    fn example() -> Repo {
        let (dir, repo) = support::example_fleet_repo();
        Repo { dir, repo }
    }

    fn location(&self) -> String {
        self.dir.path().display().to_string()
    }

    /// Changes the dev spoke's lease and commits it on `main`, signed by `key` (unsigned
    /// without one); returns the commit.
    fn commit(&self, lease: u32, key: Option<&Key>) -> String {
        let path = self.dir.path().join("fleet/spokes/edge.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let edited: String = text
            .lines()
            .map(|line| match line.split_once("leaseDurationSeconds: ") {
                Some((indent, _)) => format!("{indent}leaseDurationSeconds: {lease}\n"),
                None => format!("{line}\n"),
            })
            .collect();
        std::fs::write(&path, edited).unwrap();
        let message = format!("dev: {lease} s leases");
        let Some(key) = key else {
            return support::commit_all(&self.repo, &message);
        };
        let mut index = self.repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = self.repo.find_tree(index.write_tree().unwrap()).unwrap();
        let author = git2::Signature::now("test", "test@example.com").unwrap();
        let parent = self.repo.head().unwrap().peel_to_commit().unwrap();
        let buffer = self
            .repo
            .commit_create_buffer(&author, &author, &message, &tree, &[&parent])
            .unwrap();
        let content = buffer.as_str().unwrap();
        let commit = self
            .repo
            .commit_signed(content, &key.sign(content.as_bytes()), None)
            .unwrap();
        self.repo
            .reference("refs/heads/main", commit, true, "signed commit")
            .unwrap();
        commit.to_string()
    }

    /// An annotated tag of `commit`, signed by `key` (unsigned without one).
    fn tag(&self, name: &str, commit: &str, key: Option<&Key>) {
        let content = format!(
            "object {commit}\ntype commit\ntag {name}\ntagger test <test@example.com> 1700000000 +0000\n\nrelease {name}\n"
        );
        let signature = key.map(|key| key.sign(content.as_bytes()));
        let raw = format!("{content}{}", signature.unwrap_or_default());
        let tag = self
            .repo
            .odb()
            .unwrap()
            .write(git2::ObjectType::Tag, raw.as_bytes())
            .unwrap();
        self.repo
            .reference(&format!("refs/tags/{name}"), tag, true, "tag")
            .unwrap();
    }
}

fn spec(repo: &Repo, git_ref: &str, mode: VerifyMode, keys: &Path) -> SourceSpec {
    SourceSpec {
        location: repo.location(),
        git_ref: Some(git_ref.to_string()),
        path: Some("fleet".to_string()),
        commits_only: true,
        verify: Some(Verification {
            mode,
            keys: Keys::File(keys.to_path_buf()),
        }),
    }
}

fn refusal(result: Result<fleetform::source::Snapshot, SourceError>) -> SignatureError {
    match result {
        Err(SourceError::Signature { error, .. }) => *error,
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(snapshot) => panic!("read {}", snapshot.origin),
    }
}

#[test]
fn an_openpgp_key_past_its_expiry_or_revoked_verifies_nothing() {
    let repo = Repo::example();
    let expired = Key::pgp_expired("Old Bot <old@example.com>");
    let revoked = Key::pgp_revoked("Leaked Bot <leaked@example.com>");
    let keys_dir = tempfile::tempdir().unwrap();
    let keys = keys_dir.path().join("trusted");
    std::fs::write(
        &keys,
        format!("{}{}", expired.trusted(""), revoked.trusted("")),
    )
    .unwrap();
    for (key, lease, why) in [
        (&expired, 21, "the key expired on "),
        (
            &revoked,
            22,
            "the key was revoked (leaked): it verifies nothing",
        ),
    ] {
        repo.commit(lease, Some(key));
        let refused = refusal(read(&spec(&repo, "main", VerifyMode::Head, &keys)));
        assert!(
            matches!(&refused, SignatureError::Invalid { signer, reason, .. }
                if signer.key == key.id() && reason.contains(why)),
            "{refused:?}"
        );
    }
}

#[test]
fn only_commits_and_tags_signed_by_a_trusted_key_are_read() {
    let repo = Repo::example();
    let ssh = Key::ssh();
    let pgp = Key::pgp("Release Bot <release@example.com>");
    let stranger = Key::ssh();
    let keys_dir = tempfile::tempdir().unwrap();
    let keys = keys_dir.path().join("trusted");
    std::fs::write(
        &keys,
        format!(
            "# who may change the fleet\n{}{}",
            ssh.trusted("alice@example.com"),
            pgp.trusted("")
        ),
    )
    .unwrap();

    let by_ssh = repo.commit(11, Some(&ssh));
    let snapshot = read(&spec(&repo, &by_ssh, VerifyMode::Head, &keys)).unwrap();
    let signer = snapshot.origin.signed_by().unwrap();
    assert_eq!(
        signer.to_string(),
        format!("SSH key {} (alice@example.com)", ssh.id())
    );
    assert!(
        snapshot.origin.to_string().ends_with(&format!(
            "signed by SSH key {} (alice@example.com)",
            ssh.id()
        )),
        "{}",
        snapshot.origin
    );

    let by_pgp = repo.commit(12, Some(&pgp));
    let snapshot = read(&spec(&repo, "main", VerifyMode::Head, &keys)).unwrap();
    assert_eq!(snapshot.origin.commit(), Some(by_pgp.as_str()));
    assert_eq!(
        snapshot.origin.signed_by().unwrap().to_string(),
        format!(
            "OpenPGP key {} (Release Bot <release@example.com>)",
            pgp.id()
        )
    );

    let unsigned = repo.commit(13, None);
    assert_eq!(
        refusal(read(&spec(&repo, "main", VerifyMode::Head, &keys))),
        SignatureError::Unsigned {
            object: Signed::Commit(unsigned.clone())
        }
    );

    let by_stranger = repo.commit(14, Some(&stranger));
    let untrusted = refusal(read(&spec(&repo, "main", VerifyMode::Head, &keys)));
    assert!(
        matches!(&untrusted, SignatureError::Untrusted { signer, .. } if signer.key == stranger.id()),
        "{untrusted:?}"
    );
    assert_eq!(
        untrusted.to_string(),
        format!(
            "commit {} is signed with SSH key {}, which is not a trusted key",
            &by_stranger[..7],
            stranger.id()
        )
    );

    // A tag: its own signature counts, not the commit's; a branch is no tag.
    repo.tag("v1", &unsigned, Some(&pgp));
    let snapshot = read(&spec(&repo, "v1", VerifyMode::Tag, &keys)).unwrap();
    assert_eq!(snapshot.origin.commit(), Some(unsigned.as_str()));
    assert_eq!(snapshot.origin.signed_by().unwrap().key, pgp.id());
    repo.tag("v2", &by_ssh, None);
    assert!(matches!(
        refusal(read(&spec(&repo, "v2", VerifyMode::Tag, &keys))),
        SignatureError::Unsigned {
            object: Signed::Tag { .. }
        }
    ));
    repo.tag("v3", &by_ssh, Some(&stranger));
    assert!(matches!(
        refusal(read(&spec(&repo, "v3", VerifyMode::Tag, &keys))),
        SignatureError::Untrusted { .. }
    ));
    assert!(matches!(
        refusal(read(&spec(&repo, "main", VerifyMode::Tag, &keys))),
        SignatureError::NotATag { .. }
    ));

    // A signature moved onto other content does not verify.
    let content = format!(
        "object {by_ssh}\ntype commit\ntag v4\ntagger test <test@example.com> 1700000000 +0000\n\nrelease v4\n"
    );
    let forged = format!(
        "{}{}",
        content.replace("release v4", "release v5"),
        ssh.sign(content.as_bytes())
    );
    let odb_tag = repo
        .repo
        .odb()
        .unwrap()
        .write(git2::ObjectType::Tag, forged.as_bytes())
        .unwrap();
    repo.repo
        .reference("refs/tags/v4", odb_tag, true, "forged")
        .unwrap();
    let forged = refusal(read(&spec(&repo, "v4", VerifyMode::Tag, &keys)));
    assert!(
        matches!(&forged, SignatureError::Invalid { signer, .. } if signer.key == ssh.id()),
        "{forged:?}"
    );
}

#[test]
fn fleetform_verify_exits_0_for_a_trusted_signature_and_1_otherwise() {
    let repo = Repo::example();
    let ssh = Key::ssh();
    let keys_dir = tempfile::tempdir().unwrap();
    let keys = keys_dir.path().join("allowed_signers");
    std::fs::write(&keys, ssh.trusted("ci@example.com")).unwrap();
    let verify = |git_ref: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_fleetform"))
            .args(["verify", &repo.location(), "--ref", git_ref, "--keys"])
            .arg(&keys)
            .env_remove("FLEETFORM_SOURCE")
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let signed = repo.commit(11, Some(&ssh));
    let (code, stdout, _) = verify("main");
    assert_eq!(code, Some(0));
    assert_eq!(
        stdout,
        format!(
            "commit {signed} is signed by SSH key {} (ci@example.com)\n",
            ssh.id()
        )
    );
    let unsigned = repo.commit(12, None);
    let (code, _, stderr) = verify("main");
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains(&format!("commit {} is not signed", &unsigned[..7])),
        "{stderr}"
    );
    let (code, stdout, _) = verify(&signed);
    assert_eq!((code, stdout.is_empty()), (Some(0), false));

    // A saved plan has no commit to check: --verify with one is refused, not ignored.
    let saved = keys_dir.path().join("plan.json");
    std::fs::write(&saved, "{}").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_fleetform"))
        .arg("apply")
        .arg(&saved)
        .arg("--verify")
        .arg(&keys)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--verify checks the commit"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn condition(fleetsync: &FleetSync, type_: &str) -> Option<(String, String, String)> {
    let condition = fleetsync
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((
        condition.status.clone(),
        condition.reason.clone(),
        condition.message.clone(),
    ))
}

fn attempted(fleetsync: &FleetSync, commit: &str) -> bool {
    fleetsync
        .status
        .as_ref()
        .is_some_and(|s| s.last_attempted_commit.as_deref() == Some(commit))
}

#[tokio::test]
async fn a_fleetsync_that_requires_signatures_applies_no_unsigned_or_untrusted_commit() {
    let hub = Cluster::start().await;
    hub.namespace(SYSTEM_NAMESPACE).await;
    let repo = Repo::example();
    let ssh = Key::ssh();
    let pgp = Key::pgp("Release Bot <release@example.com>");
    let stranger = Key::pgp("Mallory <mallory@example.com>");
    let secrets: Api<Secret> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "fleet-keys"},
        "data": {
            "allowed_signers": ByteString(ssh.trusted("alice@example.com").into_bytes()),
            "release.asc": ByteString(pgp.trusted("").into_bytes()),
        },
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let first = repo.commit(11, Some(&ssh));

    let stop = CancellationToken::new();
    let config = SyncConfig {
        lease_duration: Duration::from_secs(2),
        ..SyncConfig::new(hub.hub_identity().await, "only")
    };
    let sync = fleetform::sync::start(config, stop.clone()).await.unwrap();
    let fleetsyncs: Api<FleetSync> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let object: FleetSync = serde_json::from_value(json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
        "metadata": {"name": "fleet", "namespace": SYSTEM_NAMESPACE},
        "spec": {
            "repo": repo.location(), "ref": "main", "path": "fleet", "intervalSeconds": 1,
            "verify": {"mode": "HEAD", "secretRef": {"name": "fleet-keys"}},
        },
    }))
    .unwrap();
    fleetsyncs
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let applied = |commit: &str| {
        let commit = commit.to_string();
        move |fs: &FleetSync| {
            fs.status
                .as_ref()
                .is_some_and(|s| s.last_applied_commit.as_deref() == Some(&commit))
                && condition(fs, CONDITION_READY).is_some_and(|(status, ..)| status == "True")
        }
    };
    wait_for(
        &fleetsyncs,
        "fleet",
        "the SSH-signed commit applied",
        applied(&first),
    )
    .await;

    let unsigned = repo.commit(12, None);
    let refused = wait_for(&fleetsyncs, "fleet", "the unsigned commit refused", {
        let unsigned = unsigned.clone();
        move |fs| attempted(fs, &unsigned)
    })
    .await;
    let status = refused.status.clone().unwrap();
    assert_eq!(status.last_applied_commit.as_deref(), Some(first.as_str()));
    let recorded: Vec<(&str, &str, Option<&str>)> = status
        .recent_syncs
        .iter()
        .map(|record| {
            (
                record.commit.as_str(),
                record.reason.as_str(),
                record.signer.as_deref(),
            )
        })
        .collect();
    let signer = format!("SSH key {} (alice@example.com)", ssh.id());
    assert_eq!(
        recorded,
        [
            (unsigned.as_str(), "SignatureInvalid", None),
            (first.as_str(), "Applied", Some(signer.as_str())),
        ],
        "the FleetSync records each commit fetched, with its signer"
    );
    let (stalled, reason, message) = condition(&refused, CONDITION_STALLED).unwrap();
    assert_eq!(
        (stalled.as_str(), reason.as_str()),
        ("True", "SignatureInvalid")
    );
    assert_eq!(
        message,
        format!(
            "commit {} is not signed; commit {} stays in force",
            &unsigned[..7],
            &first[..7]
        )
    );
    let spokes: Api<fleetform::api::Spoke> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    assert_eq!(
        spokes.get("dev").await.unwrap().spec.lease_duration_seconds,
        Some(11),
        "the unsigned commit's change is not applied"
    );

    let untrusted = repo.commit(13, Some(&stranger));
    let refused = wait_for(&fleetsyncs, "fleet", "the untrusted commit refused", {
        let untrusted = untrusted.clone();
        move |fs| attempted(fs, &untrusted)
    })
    .await;
    let (_, reason, message) = condition(&refused, CONDITION_READY).unwrap();
    assert_eq!(reason, "SignatureInvalid");
    assert!(
        message.contains(&format!(
            "commit {} is signed with OpenPGP key {}, which is not a trusted key",
            &untrusted[..7],
            stranger.id()
        )),
        "{message}"
    );

    let recovered = repo.commit(14, Some(&pgp));
    wait_for(
        &fleetsyncs,
        "fleet",
        "the PGP-signed commit applied",
        applied(&recovered),
    )
    .await;
    assert_eq!(
        spokes.get("dev").await.unwrap().spec.lease_duration_seconds,
        Some(14)
    );
    let events: Api<Event> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let mut refusals: Vec<(Option<k8s_openapi::jiff::Timestamp>, String)> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|event| event.reason.as_deref() == Some("SignatureInvalid"))
        .map(|event| {
            (
                event.event_time.map(|t| t.0),
                event.note.unwrap_or_default(),
            )
        })
        .collect();
    refusals.sort();
    let notes: Vec<&str> = refusals.iter().map(|(_, note)| note.as_str()).collect();
    assert_eq!(notes.len(), 2, "one Warning per refused commit: {notes:?}");
    assert!(notes[0].contains(&unsigned[..7]), "{notes:?}");
    assert!(notes[1].contains(&stranger.id()), "{notes:?}");
    stop.cancel();
    sync.stopped().await;
    hub.server.shutdown().await;
}

/// A hub with a FleetSync `fleet` following `main` of `repo` once an hour (so only a push makes
/// it fetch sooner), whose pushes are authenticated with `TOKEN`, and a sync serving the push
/// receiver and metrics on free ports, folding pushes within `coalesce`.
struct PushedFleet {
    hub: Cluster,
    sync: fleetform::sync::RunningSync,
    stop: CancellationToken,
    fleetsyncs: Api<FleetSync>,
}

const TOKEN: &str = "push-token-for-tests";

impl PushedFleet {
    async fn start(repo: &Repo, coalesce: Duration) -> PushedFleet {
        let hub = Cluster::start().await;
        hub.namespace(SYSTEM_NAMESPACE).await;
        let secrets: Api<Secret> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": "fleet-webhook"},
            "data": {"token": ByteString(TOKEN.as_bytes().to_vec())},
        }))
        .unwrap();
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        let stop = CancellationToken::new();
        let config = SyncConfig {
            lease_duration: Duration::from_secs(2),
            metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
            webhook_addr: Some("127.0.0.1:0".parse().unwrap()),
            webhook_coalesce: coalesce,
            ..SyncConfig::new(hub.hub_identity().await, "only")
        };
        let sync = fleetform::sync::start(config, stop.clone()).await.unwrap();
        let fleetsyncs: Api<FleetSync> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
        let object: FleetSync = serde_json::from_value(json!({
            "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
            "metadata": {"name": "fleet", "namespace": SYSTEM_NAMESPACE},
            "spec": {
                "repo": repo.location(), "ref": "main", "path": "fleet", "intervalSeconds": 3600,
                "webhook": {"secretRef": {"name": "fleet-webhook"}},
            },
        }))
        .unwrap();
        fleetsyncs
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
        PushedFleet {
            hub,
            sync,
            stop,
            fleetsyncs,
        }
    }

    async fn wait_applied(&self, commit: &str, what: &str) {
        let commit = commit.to_string();
        wait_for(&self.fleetsyncs, "fleet", what, move |fs| {
            fs.status
                .as_ref()
                .is_some_and(|s| s.last_applied_commit.as_deref() == Some(&commit))
        })
        .await;
    }

    /// POSTs `body` with `headers` to `path` of the receiver: the status code and the body.
    async fn post(&self, path: &str, headers: &[(&str, String)], body: &[u8]) -> (u16, String) {
        http(
            self.sync.webhook_addr().unwrap(),
            "POST",
            path,
            headers,
            body,
        )
        .await
    }

    async fn metric(&self, series: &str) -> u64 {
        let (_, text) = http(
            self.sync.metrics_addr().unwrap(),
            "GET",
            "/metrics",
            &[],
            b"",
        )
        .await;
        text.lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0)
    }

    async fn stop(self) {
        self.stop.cancel();
        self.sync.stopped().await;
        self.hub.server.shutdown().await;
    }
}

async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    // A receiver may answer before it read a body it refuses; the answer is what counts.
    let _ = stream.write_all(body).await;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response).into_owned();
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP response: {response:?}"));
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (code, body)
}

/// The headers of a GitHub push of `body`, signed with the FleetSync's token.
fn github_headers(body: &[u8]) -> [(&'static str, String); 2] {
    [
        ("X-GitHub-Event", "push".to_string()),
        ("X-Hub-Signature-256", hmac_header(TOKEN, body)),
    ]
}

/// `sha256=HEX` of the HMAC-SHA256 of `body` keyed with `token`, as GitHub signs.
fn hmac_header(token: &str, body: &[u8]) -> String {
    let tag = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.as_bytes()),
        body,
    );
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// A push of `main` as GitHub sends it for `repo`.
fn github_push(repo: &Repo) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "ref": "refs/heads/main",
        "repository": {"clone_url": repo.location(), "default_branch": "main"},
    }))
    .unwrap()
}

fn requested(fleetsync: &FleetSync) -> Option<String> {
    fleetsync
        .metadata
        .annotations
        .as_ref()?
        .get("fleetform.io/fetch-requested")
        .cloned()
}

#[tokio::test]
async fn a_signed_push_fetches_at_once_and_a_wrong_or_missing_signature_gets_401() {
    let repo = Repo::example();
    let fleet = PushedFleet::start(&repo, Duration::ZERO).await;
    let first = support::head_commit(&repo.repo);
    fleet.wait_applied(&first, "the first commit applied").await;

    let second = repo.commit(12, None);
    let body = github_push(&repo);
    let event = ("X-GitHub-Event", "push".to_string());
    let rejected = [
        vec![
            event.clone(),
            ("X-Hub-Signature-256", hmac_header("wrong", &body)),
        ],
        vec![event.clone()],
        vec![
            ("X-Gitlab-Event", "Push Hook".to_string()),
            ("X-Gitlab-Token", "wrong".to_string()),
        ],
        vec![("X-Signature", hmac_header(TOKEN, b"another body"))],
    ];
    for headers in &rejected {
        let (code, answer) = fleet.post("/hooks/fleet", headers, &body).await;
        assert_eq!(code, 401, "{headers:?}: {answer}");
    }
    assert_eq!(
        fleet
            .metric("fleetform_sync_webhook_requests_total{result=\"unauthorized\"}")
            .await,
        4
    );
    let fleetsync = fleet.fleetsyncs.get("fleet").await.unwrap();
    assert_eq!(
        requested(&fleetsync),
        None,
        "no rejected push asks for a fetch"
    );
    let (code, _) = fleet
        .post("/hooks/nobody", std::slice::from_ref(&event), &body)
        .await;
    assert_eq!(code, 404);

    let (code, answer) = fleet
        .post("/hooks/fleet", &github_headers(&body), &body)
        .await;
    assert_eq!((code, answer.as_str()), (202, "fetch requested\n"));
    fleet
        .wait_applied(&second, "the pushed commit applied")
        .await;

    let third = repo.commit(13, None);
    let gitlab = serde_json::to_vec(&json!({
        "ref": "refs/heads/main",
        "project": {"git_http_url": repo.location(), "default_branch": "main"},
    }))
    .unwrap();
    let (code, _) = fleet
        .post(
            "/hooks/fleet",
            &[
                ("X-Gitlab-Event", "Push Hook".to_string()),
                ("X-Gitlab-Token", TOKEN.to_string()),
            ],
            &gitlab,
        )
        .await;
    assert_eq!(code, 202);
    fleet.wait_applied(&third, "the GitLab push applied").await;

    let fourth = repo.commit(14, None);
    let (code, _) = fleet
        .post(
            "/hooks/fleet",
            &[("X-Signature", hmac_header(TOKEN, b""))],
            b"",
        )
        .await;
    assert_eq!(code, 202);
    fleet
        .wait_applied(&fourth, "the generic push applied")
        .await;

    // A push of another branch asks for nothing; a body over the bound is refused unread.
    let other = serde_json::to_vec(&json!({"ref": "refs/heads/dev"})).unwrap();
    let (code, answer) = fleet
        .post("/hooks/fleet", &github_headers(&other), &other)
        .await;
    assert_eq!(
        (code, answer.as_str()),
        (200, "the push is for refs/heads/dev, not main\n")
    );
    let huge = vec![b' '; fleetform::sync::webhook::MAX_BODY_BYTES + 1];
    let (code, _) = fleet
        .post(
            "/hooks/fleet",
            &[("X-Signature", hmac_header(TOKEN, &huge))],
            &huge,
        )
        .await;
    assert_eq!(code, 413);
    fleet.stop().await;
}

#[tokio::test]
async fn a_burst_of_pushes_makes_one_fetch_now_and_at_most_one_more() {
    let repo = Repo::example();
    // A window longer than the test: the burst's second request would wait for its end.
    let fleet = PushedFleet::start(&repo, Duration::from_secs(3600)).await;
    let first = support::head_commit(&repo.repo);
    fleet.wait_applied(&first, "the first commit applied").await;
    let second = repo.commit(12, None);
    let body = github_push(&repo);
    let headers = github_headers(&body);
    let answers =
        futures::future::join_all((0..50).map(|_| fleet.post("/hooks/fleet", &headers, &body)))
            .await;
    let count = |answer: &str| {
        answers
            .iter()
            .filter(|(code, text)| *code == 202 && text.trim_end() == answer)
            .count()
    };
    assert_eq!(count("fetch requested"), 1, "{answers:?}");
    assert_eq!(
        count("fetch requested at the end of the coalescing window"),
        1,
        "{answers:?}"
    );
    assert_eq!(
        count("folded into the fetch requested next"),
        48,
        "{answers:?}"
    );
    fleet
        .wait_applied(&second, "the pushed commit applied")
        .await;
    assert_eq!(
        fleet
            .metric("fleetform_sync_webhook_requests_total{result=\"accepted\"}")
            .await,
        50
    );
    fleet.stop().await;
}

/// One request a [`Receiver`] got: its path, its `X-Signature` and its JSON body.
#[derive(Debug)]
pub(crate) struct Received {
    pub(crate) path: String,
    pub(crate) signature: Option<String>,
    pub(crate) body: serde_json::Value,
}

/// A local HTTP receiver of notifications; it answers 500 to the first `fail_first` requests to
/// `/generic` and 200 to the others, and hands every request it got to the test.
pub(crate) async fn receiver(
    fail_first: usize,
) -> (
    std::net::SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<Received>,
) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut served = 0;
        while let Ok((stream, _)) = listener.accept().await {
            let mut stream = tokio::io::BufReader::new(stream);
            let mut line = String::new();
            stream.read_line(&mut line).await.unwrap();
            let path = line
                .split_whitespace()
                .nth(1)
                .unwrap_or_default()
                .to_string();
            let (mut length, mut signature) = (0, None);
            loop {
                let mut header = String::new();
                stream.read_line(&mut header).await.unwrap();
                let header = header.trim_end();
                if header.is_empty() {
                    break;
                }
                let (name, value) = header.split_once(": ").unwrap();
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.parse().unwrap(),
                    "x-signature" => signature = Some(value.to_string()),
                    _ => {}
                }
            }
            let mut body = vec![0; length];
            stream.read_exact(&mut body).await.unwrap();
            if path == "/generic" {
                served += 1;
            }
            let status = if path == "/generic" && served <= fail_first {
                "500 Internal Server Error"
            } else {
                "200 OK"
            };
            let answer =
                format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            stream.write_all(answer.as_bytes()).await.unwrap();
            let _ = tx.send(Received {
                path,
                signature,
                body: serde_json::from_slice(&body).unwrap(),
            });
        }
    });
    (addr, rx)
}

#[tokio::test]
async fn transitions_are_notified_once_each_retried_and_signed() {
    let hub = Cluster::start().await;
    hub.namespace(SYSTEM_NAMESPACE).await;
    let (addr, mut received) = receiver(1).await;
    let secrets: Api<Secret> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    for (name, path, token) in [
        ("ops-hook", "generic", Some(TOKEN)),
        ("ops-slack", "slack", None),
    ] {
        let mut data = serde_json::Map::new();
        data.insert(
            "address".into(),
            json!(ByteString(format!("http://{addr}/{path}").into_bytes())),
        );
        if let Some(token) = token {
            data.insert("token".into(), json!(ByteString(token.as_bytes().to_vec())));
        }
        let secret: Secret =
            serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap();
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }
    let repo = Repo::example();
    let first = support::head_commit(&repo.repo);
    let stop = CancellationToken::new();
    let config = SyncConfig {
        lease_duration: Duration::from_secs(2),
        // Every transition is a message of its own here; the window has its own test.
        notify_window: Duration::ZERO,
        ..SyncConfig::new(hub.hub_identity().await, "only")
    };
    let sync = fleetform::sync::start(config, stop.clone()).await.unwrap();
    let fleetsyncs: Api<FleetSync> = Api::namespaced(hub.client.clone(), SYSTEM_NAMESPACE);
    let object: FleetSync = serde_json::from_value(json!({
        "apiVersion": "fleetform.io/v1alpha1", "kind": "FleetSync",
        "metadata": {"name": "fleet", "namespace": SYSTEM_NAMESPACE},
        "spec": {
            "repo": repo.location(), "ref": "main", "path": "fleet", "intervalSeconds": 1,
            "notify": [
                {"type": "generic", "secretRef": {"name": "ops-hook"}},
                {"type": "slack", "secretRef": {"name": "ops-slack"}},
            ],
        },
    }))
    .unwrap();
    fleetsyncs
        .create(&PostParams::default(), &object)
        .await
        .unwrap();

    let mut next = async || {
        tokio::time::timeout(support::PATIENCE, received.recv())
            .await
            .expect("a notification")
            .unwrap()
    };
    // The first request to /generic fails (500) and is retried: the same message comes again.
    let mut applied = vec![next().await, next().await, next().await];
    applied.sort_by(|a, b| a.path.cmp(&b.path));
    let failed = applied.remove(0);
    assert_eq!(applied[0].path, "/generic");
    assert_eq!(
        applied[0].body, failed.body,
        "the retry sends the same message"
    );
    assert_eq!(applied[0].body["event"], "Applied");
    assert_eq!(applied[0].body["commit"], first.as_str());
    assert_eq!(applied[0].body["fleetSync"], "fleet");
    assert_eq!(
        applied[0].signature.as_deref(),
        Some(hmac_header(TOKEN, &serde_json::to_vec(&applied[0].body).unwrap()).as_str())
    );
    assert_eq!(applied[1].path, "/slack");
    let text = applied[1].body["text"].as_str().unwrap();
    assert!(text.contains(&format!("applied {}", &first[..7])), "{text}");

    // An invalid commit stalls the sync: one message per provider, not one per retry.
    std::fs::write(repo.dir.path().join("fleet/broken.yaml"), "kind: [").unwrap();
    let broken = support::commit_all(&repo.repo, "broken");
    let mut stalled = [next().await, next().await];
    stalled.sort_by(|a, b| a.path.cmp(&b.path));
    assert_eq!(stalled[0].body["event"], "Stalled");
    assert_eq!(stalled[0].body["reason"], "InvalidCommit");
    assert_eq!(stalled[0].body["commit"], broken.as_str());
    std::fs::remove_file(repo.dir.path().join("fleet/broken.yaml")).unwrap();
    let fixed = support::commit_all(&repo.repo, "fixed");
    let mut events: Vec<(String, String)> = Vec::new();
    for _ in 0..4 {
        let got = next().await;
        events.push((
            got.path,
            got.body["event"].as_str().unwrap_or("slack").to_string(),
        ));
    }
    events.sort();
    assert_eq!(
        events,
        [
            ("/generic".to_string(), "Applied".to_string()),
            ("/generic".to_string(), "Recovered".to_string()),
            ("/slack".to_string(), "slack".to_string()),
            ("/slack".to_string(), "slack".to_string()),
        ]
    );
    wait_for(
        &fleetsyncs,
        "fleet",
        "the fixed commit applied",
        move |fs| {
            fs.status
                .as_ref()
                .is_some_and(|s| s.last_applied_commit.as_deref() == Some(fixed.as_str()))
        },
    )
    .await;
    stop.cancel();
    sync.stopped().await;
    assert!(
        received.try_recv().is_err(),
        "no message for retries that failed as the last one did"
    );
    hub.server.shutdown().await;
}

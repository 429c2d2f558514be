//! Registration by certificate (DESIGN §4.1): the agent trades its bootstrap kubeconfig for a
//! client certificate, keeps it in `hub-kubeconfig-secret` on the spoke, runs its loops with it,
//! rotates it before it expires and registers again when the bootstrap kubeconfig changes.
//!
//! One identity at a time: the loops of [`super::run::run_loops`] run with a client made from
//! the current certificate, and are stopped and started again with the next one (rotation or
//! re-bootstrap), so none of them ever holds a stale client. A renewal is requested while the
//! loops keep running with the old certificate, which stays valid until the new one is stored.
//! Every decision (reuse, rotation time, CSR state, the pending-CSR limit) comes from
//! [`super::hub_identity`] and [`super::rotation`]; this module only waits, reads and writes.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Event, ObjectReference, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::hub_connection::{HubConnection, client_from_kubeconfig};
use super::hub_identity::{
    CsrState, HubIdentity, bootstrap_fingerprint, csr_state, may_request_certificate, new_agent_id,
};
use super::rotation::registration_csr;
use super::run::{AgentConfig, FIELD_MANAGER, RETRY_DELAY, create_cluster, run_loops};
use crate::api::ManagedCluster;
use crate::api::vocabulary::{
    BOOTSTRAP_HUB_KUBECONFIG_SECRET, CONDITION_CERTIFICATE_ROTATED, HUB_KUBECONFIG_SECRET,
    LABEL_CLUSTER_NAME, REASON_CLIENT_CERTIFICATE_UPDATE_FAILED, REASON_CLIENT_CERTIFICATE_UPDATED,
    STATUS_FALSE, STATUS_TRUE,
};
use crate::runtime::clock::{sleep_until, wait_until};
use crate::runtime::conditions::set_conditions;
use crate::runtime::watch::BackingOff;

/// Key of the bootstrap Secret holding the kubeconfig.
pub const BOOTSTRAP_KUBECONFIG_KEY: &str = "kubeconfig";
/// Reason of the spoke Event saying the agent waits because too many of its CSRs are pending
/// (OCM's).
pub const REASON_CERTIFICATE_CREATION_HALTED: &str = "ClientCertificateCreationHalted";

/// How long the agent waits before asking again after a refused CSR or a full pending queue.
const REQUEST_AGAIN_DELAY: Duration = Duration::from_secs(5);

/// Why the agent stopped using an identity.
enum Interrupted {
    Shutdown,
    /// The bootstrap kubeconfig changed, or the identity can no longer be used or renewed.
    RegisterAgain,
}

/// Registers, runs the loops and rotates until `shutdown` is cancelled.
pub(crate) async fn run(
    config: AgentConfig,
    readiness: Arc<crate::health::Readiness>,
    shutdown: CancellationToken,
) {
    let (bootstrap_tx, mut bootstrap) = watch::channel(None::<String>);
    let follower = match &config.hub {
        HubConnection::Bootstrap(text) => {
            bootstrap_tx.send_replace(Some(text.clone()));
            None
        }
        _ => Some(tokio::spawn(follow_bootstrap_secret(
            config.spoke.clone(),
            config.agent_namespace.clone(),
            bootstrap_tx,
            shutdown.clone(),
        ))),
    };
    info!(
        cluster = config.cluster_name,
        "agent registering by certificate"
    );
    while let Some(kubeconfig) = next_bootstrap(&mut bootstrap, &shutdown).await {
        let fingerprint = bootstrap_fingerprint(&kubeconfig);
        let obtained = tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = bootstrap_changes(bootstrap.clone(), &fingerprint) => continue,
            identity = obtain(&config, &kubeconfig, &fingerprint) => identity,
        };
        readiness.set_ready();
        let served = serve(&config, &kubeconfig, obtained, &mut bootstrap, &shutdown).await;
        readiness.set_not_ready("the agent is registering again");
        match served {
            Interrupted::Shutdown => break,
            Interrupted::RegisterAgain => {
                info!(cluster = config.cluster_name, "registering again");
            }
        }
    }
    if let Some(follower) = follower {
        let _ = follower.await;
    }
    info!(cluster = config.cluster_name, "agent stopped");
}

/// The bootstrap kubeconfig once there is one; `None` on shutdown.
async fn next_bootstrap(
    bootstrap: &mut watch::Receiver<Option<String>>,
    shutdown: &CancellationToken,
) -> Option<String> {
    tokio::select! {
        _ = shutdown.cancelled() => None,
        found = bootstrap.wait_for(Option::is_some) => found.ok().and_then(|found| found.clone()),
    }
}

/// Resolves once the bootstrap kubeconfig is another than the one of `fingerprint` (a deleted
/// one changes nothing: the agent keeps the identity it has).
async fn bootstrap_changes(mut bootstrap: watch::Receiver<Option<String>>, fingerprint: &str) {
    let changed = bootstrap
        .wait_for(|current| {
            current
                .as_deref()
                .is_some_and(|text| bootstrap_fingerprint(text) != fingerprint)
        })
        .await
        .is_ok();
    if !changed {
        std::future::pending::<()>().await;
    }
}

/// Publishes the kubeconfig of the spoke's bootstrap Secret, by watch.
async fn follow_bootstrap_secret(
    spoke: Client,
    namespace: String,
    bootstrap: watch::Sender<Option<String>>,
    shutdown: CancellationToken,
) {
    let secrets: Api<Secret> = Api::namespaced(spoke, &namespace);
    let config = watcher::Config::default()
        .fields(&format!("metadata.name={BOOTSTRAP_HUB_KUBECONFIG_SECRET}"));
    let mut events = watcher(secrets, config)
        .backing_off()
        .applied_objects()
        .boxed();
    loop {
        let secret = tokio::select! {
            _ = shutdown.cancelled() => return,
            event = events.next() => match event {
                None => return,
                Some(Ok(secret)) => secret,
                Some(Err(err)) => {
                    warn!(%err, namespace, "watching Secret {BOOTSTRAP_HUB_KUBECONFIG_SECRET}");
                    continue;
                }
            },
        };
        let kubeconfig = secret
            .data
            .as_ref()
            .and_then(|data| data.get(BOOTSTRAP_KUBECONFIG_KEY))
            .and_then(|ByteString(bytes)| String::from_utf8(bytes.clone()).ok());
        match kubeconfig {
            Some(text) => {
                bootstrap.send_if_modified(|current| {
                    let modified = current.as_deref() != Some(text.as_str());
                    *current = Some(text);
                    modified
                });
            }
            None => warn!(
                namespace,
                "Secret {BOOTSTRAP_HUB_KUBECONFIG_SECRET} has no UTF-8 key {BOOTSTRAP_KUBECONFIG_KEY}"
            ),
        }
    }
}

/// The agent's identity: the stored one if it may be used again, else a new one obtained with
/// the bootstrap kubeconfig (and stored). Retries until it has one.
async fn obtain(config: &AgentConfig, bootstrap: &str, fingerprint: &str) -> HubIdentity {
    let secrets: Api<Secret> = Api::namespaced(config.spoke.clone(), &config.agent_namespace);
    match secrets.get_opt(HUB_KUBECONFIG_SECRET).await {
        Ok(Some(secret)) => {
            match HubIdentity::from_secret(
                &secret,
                &config.cluster_name,
                fingerprint,
                Timestamp::now(),
            ) {
                Ok(identity) => {
                    info!(
                        cluster = config.cluster_name,
                        agent = identity.agent_id,
                        "reusing the certificate in {HUB_KUBECONFIG_SECRET}"
                    );
                    return identity;
                }
                Err(why) => info!(
                    cluster = config.cluster_name,
                    "not reusing {HUB_KUBECONFIG_SECRET}: {why}"
                ),
            }
        }
        Ok(None) => {}
        Err(err) => warn!(%err, "reading {HUB_KUBECONFIG_SECRET}; registering anew"),
    }
    let agent_id = new_agent_id();
    let mut warned_full = false;
    loop {
        match bootstrap_once(config, bootstrap, &agent_id, &mut warned_full).await {
            Ok(Some(identity)) => {
                store(config, &identity).await;
                info!(
                    cluster = config.cluster_name,
                    agent = agent_id,
                    "registered; certificate stored in {HUB_KUBECONFIG_SECRET}"
                );
                return identity;
            }
            Ok(None) => {}
            Err(err) => warn!(cluster = config.cluster_name, "registering: {err}"),
        }
        tokio::time::sleep(REQUEST_AGAIN_DELAY).await;
    }
}

/// One registration attempt with the bootstrap kubeconfig: the ManagedCluster if it is absent,
/// then a CSR (unless too many are pending) and its certificate. `Ok(None)`: try again later.
async fn bootstrap_once(
    config: &AgentConfig,
    bootstrap: &str,
    agent_id: &str,
    warned_full: &mut bool,
) -> Result<Option<HubIdentity>, String> {
    let hub = client_from_kubeconfig(bootstrap, "bootstrap kubeconfig")
        .await
        .map_err(|err| err.to_string())?;
    create_cluster(&Api::all(hub.clone()), config)
        .await
        .map_err(|err| err.to_string())?;
    let cluster = &config.cluster_name;
    if !may_request(&hub, cluster).await? {
        if !*warned_full {
            *warned_full = true;
            let message = format!(
                "too many pending CSRs for cluster {cluster}; no new one until the hub answers"
            );
            warn!(cluster, "{message}");
            record_event(config, REASON_CERTIFICATE_CREATION_HALTED, &message).await;
        }
        return Ok(None);
    }
    let certificate = request_certificate(&hub, config, agent_id).await?;
    match certificate {
        Some((certificate_pem, key_pem)) => {
            HubIdentity::issued(cluster, agent_id, bootstrap, certificate_pem, key_pem)
                .map(Some)
                .map_err(|err| err.to_string())
        }
        None => Ok(None),
    }
}

/// Whether fewer than the most registration CSRs of `cluster` are pending. An identity that may
/// not list CSRs cannot count them and requests anyway: fleetform's bootstrap tokens see no CSR
/// but their own (on a hub with OCM's bootstrap role, which lets every token list them all, the
/// limit holds at bootstrap too).
async fn may_request(hub: &Client, cluster: &str) -> Result<bool, String> {
    let listed = Api::<CertificateSigningRequest>::all(hub.clone())
        .list(&ListParams::default().labels(&format!("{LABEL_CLUSTER_NAME}={cluster}")))
        .await;
    match listed {
        Ok(listed) => Ok(may_request_certificate(&listed.items)),
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(true),
        Err(err) => Err(format!("cannot list the cluster's CSRs: {err}")),
    }
}

/// Creates a registration CSR through `hub` and waits for its certificate: the certificate and
/// key PEM, or `None` if the CSR was refused.
async fn request_certificate(
    hub: &Client,
    config: &AgentConfig,
    agent_id: &str,
) -> Result<Option<(String, String)>, String> {
    let pending = registration_csr(
        &config.cluster_name,
        agent_id,
        config.client_cert_expiration_seconds,
    )
    .map_err(|err| err.to_string())?;
    let csrs: Api<CertificateSigningRequest> = Api::all(hub.clone());
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    let created = csrs
        .create(&params, &pending.csr)
        .await
        .map_err(|err| format!("cannot create a CSR: {err}"))?;
    let name = created.name_any();
    info!(
        cluster = config.cluster_name,
        csr = name,
        "CSR created; waiting for the hub"
    );
    let answered = await_answer(csrs, &name).await?;
    match answered.as_ref().map(csr_state) {
        Some(CsrState::Issued(certificate)) => Ok(Some((certificate, pending.private_key_pem))),
        Some(CsrState::Refused(why)) => {
            warn!(
                cluster = config.cluster_name,
                csr = name,
                "CSR refused: {why}"
            );
            Ok(None)
        }
        _ => Err(format!("CSR {name} is gone")),
    }
}

/// Waits until the CSR `name` is answered (refused or issued); `None` if it is gone. The watch
/// names the CSR and streams its current state itself, with no list: a bootstrap token may
/// watch its own CSR but list none.
async fn await_answer(
    csrs: Api<CertificateSigningRequest>,
    name: &str,
) -> Result<Option<CertificateSigningRequest>, String> {
    let config = watcher::Config::default()
        .fields(&format!("metadata.name={name}"))
        .streaming_lists();
    let mut events = watcher(csrs, config).boxed();
    let mut seen = false;
    while let Some(event) = events.next().await {
        let csr = match event.map_err(|err| format!("watching CSR {name}: {err}"))? {
            watcher::Event::Apply(csr) | watcher::Event::InitApply(csr) => csr,
            watcher::Event::Delete(_) => return Ok(None),
            watcher::Event::Init => {
                seen = false;
                continue;
            }
            watcher::Event::InitDone if !seen => return Ok(None),
            watcher::Event::InitDone => continue,
        };
        seen = true;
        if !matches!(csr_state(&csr), CsrState::Pending | CsrState::Approved) {
            return Ok(Some(csr));
        }
    }
    Ok(None)
}

/// Writes the identity to `hub-kubeconfig-secret`, retrying until it is stored.
async fn store(config: &AgentConfig, identity: &HubIdentity) {
    let secrets: Api<Secret> = Api::namespaced(config.spoke.clone(), &config.agent_namespace);
    let mut secret =
        serde_json::to_value(identity.to_secret(&config.agent_namespace)).unwrap_or_default();
    secret["apiVersion"] = "v1".into();
    secret["kind"] = "Secret".into();
    let params = PatchParams::apply(FIELD_MANAGER).force();
    while let Err(err) = secrets
        .patch(HUB_KUBECONFIG_SECRET, &params, &Patch::Apply(&secret))
        .await
    {
        warn!(
            %err,
            namespace = config.agent_namespace,
            "writing Secret {HUB_KUBECONFIG_SECRET} in the agent's namespace on the spoke; retrying"
        );
        tokio::time::sleep(RETRY_DELAY).await;
    }
}

/// Runs the loops with `identity`, rotating it when due, until shutdown, a change of the
/// bootstrap kubeconfig, or an identity that can no longer be renewed.
async fn serve(
    config: &AgentConfig,
    bootstrap: &str,
    mut identity: HubIdentity,
    bootstrap_rx: &mut watch::Receiver<Option<String>>,
    shutdown: &CancellationToken,
) -> Interrupted {
    let mut rotated = false;
    loop {
        let hub = match client_from_kubeconfig(&identity.kubeconfig, HUB_KUBECONFIG_SECRET).await {
            Ok(hub) => hub,
            Err(err) => {
                warn!(%err, "cannot use the issued identity; registering again");
                return Interrupted::RegisterAgain;
            }
        };
        let session = shutdown.child_token();
        let loops = tokio::spawn(run_loops(
            config.clone(),
            hub.clone(),
            Some(identity.kubeconfig.clone()),
            session.clone(),
        ));
        if rotated {
            tokio::spawn(report_rotation(
                config.cluster_name.clone(),
                hub.clone(),
                rotated_condition(&identity),
                session.clone(),
            ));
        }
        let renewed = tokio::select! {
            _ = shutdown.cancelled() => Err(Interrupted::Shutdown),
            _ = bootstrap_changes(bootstrap_rx.clone(), &identity.bootstrap_fingerprint) => {
                info!(cluster = config.cluster_name, "the bootstrap kubeconfig changed");
                Err(Interrupted::RegisterAgain)
            }
            renewed = renew(config, bootstrap, &hub, &identity) => renewed,
        };
        session.cancel();
        if let Err(err) = loops.await {
            warn!(%err, "agent loops ended abnormally");
        }
        match renewed {
            Ok(next) => {
                tokio::select! {
                    _ = shutdown.cancelled() => return Interrupted::Shutdown,
                    _ = store(config, &next) => {}
                }
                info!(
                    cluster = config.cluster_name,
                    "client certificate rotated; loops restart with it"
                );
                identity = next;
                rotated = true;
            }
            Err(interrupted) => return interrupted,
        }
    }
}

/// Waits until the identity is due for rotation, then renews it with itself. A failed renewal is
/// reported on the ManagedCluster and retried; an identity that expires before it is renewed
/// ends in [`Interrupted::RegisterAgain`] (register again).
async fn renew(
    config: &AgentConfig,
    bootstrap: &str,
    hub: &Client,
    identity: &HubIdentity,
) -> Result<HubIdentity, Interrupted> {
    sleep_until(identity.lifetime.rotation_deadline(fastrand::f64())).await;
    loop {
        let attempt = async {
            match may_request(hub, &config.cluster_name).await {
                Ok(true) => request_certificate(hub, config, &identity.agent_id).await,
                Ok(false) => Err(
                    "Stop creating csr since there are too many csr created already on hub"
                        .to_string(),
                ),
                Err(err) => Err(err),
            }
        };
        let deadline = wait_until(identity.lifetime.not_after, Timestamp::now());
        let failure = match tokio::time::timeout(deadline, attempt).await {
            Err(_) => {
                warn!(
                    cluster = config.cluster_name,
                    "the certificate expired before it was renewed; registering again"
                );
                return Err(Interrupted::RegisterAgain);
            }
            Ok(Ok(Some((certificate, key)))) => {
                match HubIdentity::issued(
                    &config.cluster_name,
                    &identity.agent_id,
                    bootstrap,
                    certificate,
                    key,
                ) {
                    Ok(next) => return Ok(next),
                    Err(err) => err.to_string(),
                }
            }
            Ok(Ok(None)) => "the renewal CSR was refused".to_string(),
            Ok(Err(err)) => err,
        };
        warn!(
            cluster = config.cluster_name,
            "rotating the client certificate: {failure}"
        );
        let failed = condition(
            STATUS_FALSE,
            REASON_CLIENT_CERTIFICATE_UPDATE_FAILED,
            format!("Failed to rotate client certificate: {failure}"),
        );
        let clusters: Api<ManagedCluster> = Api::all(hub.clone());
        if let Err(err) = set_conditions(&clusters, &config.cluster_name, FIELD_MANAGER, |_| {
            vec![failed.clone()]
        })
        .await
        {
            warn!(%err, "writing {CONDITION_CERTIFICATE_ROTATED}");
        }
        if Timestamp::now() >= identity.lifetime.not_after {
            return Err(Interrupted::RegisterAgain);
        }
        tokio::time::sleep(REQUEST_AGAIN_DELAY).await;
    }
}

fn condition(status: &str, reason: &str, message: String) -> Condition {
    Condition {
        type_: CONDITION_CERTIFICATE_ROTATED.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message,
        observed_generation: None,
        last_transition_time: Time(Timestamp::now()),
    }
}

fn rotated_condition(identity: &HubIdentity) -> Condition {
    condition(
        STATUS_TRUE,
        REASON_CLIENT_CERTIFICATE_UPDATED,
        format!(
            "client certificate rotated starting from {} to {}",
            identity.lifetime.not_before, identity.lifetime.not_after
        ),
    )
}

/// Writes ClusterCertificateRotated with the new identity, retrying until written or the
/// session ends.
async fn report_rotation(
    cluster: String,
    hub: Client,
    rotated: Condition,
    session: CancellationToken,
) {
    let clusters: Api<ManagedCluster> = Api::all(hub);
    loop {
        let written = set_conditions(&clusters, &cluster, FIELD_MANAGER, |_| {
            vec![rotated.clone()]
        });
        tokio::select! {
            _ = session.cancelled() => return,
            result = written => match result {
                Ok(_) => return,
                Err(err) => warn!(%err, "writing {CONDITION_CERTIFICATE_ROTATED}; retrying"),
            },
        }
        tokio::select! {
            _ = session.cancelled() => return,
            _ = tokio::time::sleep(RETRY_DELAY) => {}
        }
    }
}

/// An Event on the spoke, in the agent's namespace, about that namespace.
async fn record_event(config: &AgentConfig, reason: &str, message: &str) {
    let namespace = &config.agent_namespace;
    let about = ObjectReference {
        api_version: Some("v1".to_string()),
        kind: Some("Namespace".to_string()),
        name: Some(namespace.clone()),
        ..ObjectReference::default()
    };
    let event = super::run::warning_event(
        namespace,
        about,
        reason,
        message.to_string(),
        &config.cluster_name,
    );
    let events: Api<Event> = Api::namespaced(config.spoke.clone(), namespace);
    if let Err(err) = crate::events::create(&events, namespace, event).await {
        warn!(%err, "recording event {reason}");
    }
}

//! Whether the hub approves a certificate signing request (DESIGN §4.1 and §4.3, seed 001).
//!
//! Two kinds of CSR reach the hub from fleetform agents:
//!
//! - **registration** CSRs, by which a spoke's agent gets its hub identity. fleetform approves one
//!   only if everything in it names the same declared, accepted spoke: signer, subject, the
//!   `open-cluster-management.io/cluster-name` label, usages, and the requester, which must be
//!   that spoke's own bootstrap token (OCM lets any bootstrap holder register under any name;
//!   fleetform does not). A renewal, requested by the identity it renews, needs no bootstrap token.
//! - **addon** CSRs, by which the agent gets a certificate for one of its addons. fleetform
//!   approves one only if the addon is enabled on the cluster it names (its ManagedClusterAddOn
//!   is in the cluster's namespace and not being deleted), signer, user, groups and
//!   organisational units match a registration of the AddOn document, and the requester is the
//!   agent of that cluster. OCM's default subject is accepted as OCM's approver accepts it: its
//!   two groups, with or without `system:authenticated`. Denials of one registration are paced
//!   ([`DenialPacer`]) so that a spoke asking again and again is not answered in a tight loop.
//!
//! Every decision carries a reason meant for the CSR's Approved or Denied condition (or the log,
//! when the CSR is left alone). CSRs that are not fleetform's, or that wait for something (a spoke
//! not yet in git or not yet accepted), are left pending; CSRs that claim something they may not
//! are denied. Unreadable requests are denied, never a panic. This module only decides: it must
//! not approve, sign or read anything itself.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::prelude::FromDer;

use crate::api::addon::{RegistrationConfig, Subject};
use crate::api::fleet::AddOnRegistration;
use crate::api::identity::{
    AUTHENTICATED_GROUP, BOOTSTRAP_USER_PREFIX, USAGE_CLIENT_AUTH, USAGES_ALSO_ALLOWED,
    agent_common_name, agent_organizations, cluster_group,
};
use crate::api::vocabulary::{
    CONDITION_CERTIFICATE_ROTATED, CSR_APPROVED, CSR_DENIED, LABEL_ADDON_NAME, LABEL_CLUSTER_NAME,
    REASON_CLIENT_CERTIFICATE_UPDATE_FAILED, SIGNER_KUBE_APISERVER_CLIENT, STATUS_FALSE,
    STATUS_TRUE,
};

/// Reason of the Approved condition fleetform's hub writes.
pub const REASON_APPROVED: &str = "AutoApprovedByFleetform";
/// Reason of the Denied condition fleetform's hub writes.
pub const REASON_DENIED: &str = "DeniedByFleetform";

/// What the hub does with a CSR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    Deny,
    /// Leave it pending: not fleetform's to judge, or not yet.
    Ignore,
}

/// A verdict and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub reason: String,
}

impl Decision {
    fn approve(reason: impl Into<String>) -> Self {
        Decision {
            verdict: Verdict::Approve,
            reason: reason.into(),
        }
    }

    fn deny(reason: impl Into<String>) -> Self {
        Decision {
            verdict: Verdict::Deny,
            reason: reason.into(),
        }
    }

    fn ignore(reason: impl Into<String>) -> Self {
        Decision {
            verdict: Verdict::Ignore,
            reason: reason.into(),
        }
    }

    /// The condition to add to the CSR's status: Approved or Denied with the reason as its
    /// message; `None` when the CSR is left alone.
    pub fn condition(&self, now: Timestamp) -> Option<CertificateSigningRequestCondition> {
        let (type_, reason) = match self.verdict {
            Verdict::Approve => (CSR_APPROVED, REASON_APPROVED),
            Verdict::Deny => (CSR_DENIED, REASON_DENIED),
            Verdict::Ignore => return None,
        };
        Some(CertificateSigningRequestCondition {
            type_: type_.to_string(),
            status: STATUS_TRUE.to_string(),
            reason: Some(reason.to_string()),
            message: Some(self.reason.clone()),
            last_update_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
        })
    }
}

/// What the hub knows about the spoke a registration CSR names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpokeIdentity {
    /// The spoke's (and its ManagedCluster's) name.
    pub cluster: String,
    /// Whether the spoke is declared in the fleet repo.
    pub declared: bool,
    /// Whether its ManagedCluster has `hubAcceptsClient: true`.
    pub accepted: bool,
    /// The ids of the bootstrap tokens issued to this spoke only (two while one replaces
    /// another), none if none was.
    pub bootstrap_token_ids: Vec<String>,
    /// The users a Hub's `registration.autoApproval.users` lists: their registration requests
    /// of a cluster no Spoke declares are approved once the cluster is accepted, as OCM's
    /// ManagedClusterAutoApproval does.
    pub auto_approval_users: Vec<String>,
    /// The agents (common names) the accepted cluster's RBAC is bound to, as the accept loop
    /// recorded them: a request is approved only once its user is bound, so the agent's first
    /// requests with the new certificate are allowed.
    pub bound_users: BTreeSet<String>,
}

impl SpokeIdentity {
    /// The usernames the API server gives the holders of this spoke's bootstrap tokens.
    pub fn bootstrap_users(&self) -> Vec<String> {
        self.bootstrap_token_ids
            .iter()
            .map(|id| format!("{BOOTSTRAP_USER_PREFIX}{id}"))
            .collect()
    }
}

/// The subject a certificate request asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestedSubject {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub organizational_units: Vec<String>,
}

/// Why a CSR's `spec.request` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("the request is not PEM: {0}")]
    NotPem(#[from] pem::PemError),
    #[error("the request is a PEM {0:?} block, not a CERTIFICATE REQUEST")]
    WrongPemBlock(String),
    #[error("the request is not a PKCS#10 certificate request: {0}")]
    NotACertificateRequest(String),
    #[error("the request's signature does not verify against its own public key")]
    BadSignature,
    #[error("the request's subject has {0} common names; exactly one is required")]
    CommonNameCount(usize),
    #[error("the request's subject has an attribute that is not a string")]
    UnreadableSubject,
}

/// The subjects of the requests [`read_request`] read lately and found well signed, by the
/// SHA-256 of the request's text: the accept loop reads a registration CSR at each of its
/// cluster's passes and the approval loop at each of its own, and checking the signature (an
/// ECDSA verification) again each time was 3.6% of the hub's CPU in a join. Forgotten all at
/// once past [`READ_KEPT`] (a few hundred bytes each: about 1 MB at most).
static READ: LazyLock<Mutex<HashMap<Vec<u8>, RequestedSubject>>> = LazyLock::new(Default::default);

const READ_KEPT: usize = 4096;

/// Reads the subject of a PEM certificate request and checks that the request is signed by the
/// key it carries (so the requester holds the key it wants certified). The same text read again
/// is answered from what was found ([`READ`]); a request that failed is checked every time.
pub fn read_request(request_pem: &[u8]) -> Result<RequestedSubject, RequestError> {
    let digest = ring::digest::digest(&ring::digest::SHA256, request_pem)
        .as_ref()
        .to_vec();
    let memo = || READ.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(subject) = memo().get(&digest) {
        return Ok(subject.clone());
    }
    let subject = verify_request(request_pem)?;
    let mut kept = memo();
    if kept.len() >= READ_KEPT {
        kept.clear();
    }
    kept.insert(digest, subject.clone());
    Ok(subject)
}

fn verify_request(request_pem: &[u8]) -> Result<RequestedSubject, RequestError> {
    let block = pem::parse(request_pem)?;
    if block.tag() != "CERTIFICATE REQUEST" {
        return Err(RequestError::WrongPemBlock(block.tag().to_string()));
    }
    let (_, request) = X509CertificationRequest::from_der(block.contents())
        .map_err(|error| RequestError::NotACertificateRequest(error.to_string()))?;
    request
        .verify_signature()
        .map_err(|_| RequestError::BadSignature)?;
    let subject = &request.certification_request_info.subject;
    let strings = |attributes: Vec<&x509_parser::x509::AttributeTypeAndValue<'_>>| {
        attributes
            .into_iter()
            .map(|attribute| attribute.as_str().map(str::to_string))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| RequestError::UnreadableSubject)
    };
    let mut common_names = strings(subject.iter_common_name().collect())?;
    if common_names.len() != 1 {
        return Err(RequestError::CommonNameCount(common_names.len()));
    }
    Ok(RequestedSubject {
        common_name: common_names.remove(0),
        organizations: strings(subject.iter_organization().collect())?,
        organizational_units: strings(subject.iter_organizational_unit().collect())?,
    })
}

/// Decides a registration CSR. `spoke` is what the hub knows of the spoke named by the CSR's
/// cluster-name label (see [`registration_cluster`]), `None` if it knows nothing.
pub fn decide_registration(
    csr: &CertificateSigningRequest,
    spoke: Option<&SpokeIdentity>,
) -> Decision {
    if let Some(decided) = already_decided(csr) {
        return decided;
    }
    if csr.spec.signer_name != SIGNER_KUBE_APISERVER_CLIENT {
        return Decision::ignore(format!(
            "signer {} is not the registration signer",
            csr.spec.signer_name
        ));
    }
    let Some(cluster) = registration_cluster(csr) else {
        return Decision::ignore(format!(
            "no {LABEL_CLUSTER_NAME} label: not a registration request"
        ));
    };
    if label(csr, LABEL_ADDON_NAME).is_some() {
        return Decision::ignore("an addon request, not a registration request");
    }
    let subject = match read_request(&csr.spec.request.0) {
        Ok(subject) => subject,
        Err(error) => return Decision::deny(error.to_string()),
    };
    let Some(agent_id) = subject
        .common_name
        .strip_prefix(&cluster_group(cluster))
        .and_then(|rest| rest.strip_prefix(':'))
        .filter(|id| !id.is_empty() && !id.contains(':'))
    else {
        return Decision::deny(format!(
            "common name {:?} is not {}<agent-id> for cluster {cluster}",
            subject.common_name,
            agent_common_name(cluster, "")
        ));
    };
    let expected = agent_organizations(cluster);
    if !same_set(&subject.organizations, &expected) {
        return Decision::deny(format!(
            "organizations {:?} are not exactly {expected:?}",
            subject.organizations
        ));
    }
    if let Err(reason) = check_usages(csr) {
        return Decision::deny(reason);
    }
    let requester = csr.spec.username.as_deref().unwrap_or_default();
    let unbound = |spoke: &SpokeIdentity| {
        (!spoke.bound_users.contains(&subject.common_name)).then(|| {
            Decision::ignore(format!(
                "cluster {cluster}'s agent {agent_id} is not bound to its RBAC yet; the request is approved once the hub has bound it"
            ))
        })
    };
    let spoke = match spoke {
        Some(spoke) if spoke.cluster == cluster && spoke.declared => spoke,
        Some(spoke)
            if spoke.cluster == cluster
                && spoke.accepted
                && spoke
                    .auto_approval_users
                    .iter()
                    .any(|user| user == requester) =>
        {
            if let Some(wait) = unbound(spoke) {
                return wait;
            }
            return Decision::approve(format!(
                "registration of cluster {cluster}'s agent {agent_id}, requested by {requester}, whom a Hub's autoApproval lists"
            ));
        }
        _ => {
            return Decision::ignore(format!(
                "cluster {cluster} is not declared in the fleet repo; the request stays pending"
            ));
        }
    };
    if !spoke.accepted {
        return Decision::ignore(format!(
            "cluster {cluster} is not accepted yet; the request stays pending"
        ));
    }
    if requester == subject.common_name {
        if let Some(wait) = unbound(spoke) {
            return wait;
        }
        return Decision::approve(format!(
            "renewal of cluster {cluster}'s agent {agent_id}, requested by itself"
        ));
    }
    let bootstrap_users = spoke.bootstrap_users();
    if bootstrap_users.iter().any(|user| user == requester) {
        if let Some(wait) = unbound(spoke) {
            return wait;
        }
        return Decision::approve(format!(
            "registration of cluster {cluster}'s agent {agent_id} with the cluster's bootstrap token"
        ));
    }
    if bootstrap_users.is_empty() {
        return Decision::deny(format!(
            "requested by {requester:?}, but cluster {cluster} has no bootstrap token"
        ));
    }
    Decision::deny(format!(
        "requested by {requester:?}, but cluster {cluster} registers only with {}",
        bootstrap_users.join(" or ")
    ))
}

/// The cluster a CSR names by its `open-cluster-management.io/cluster-name` label, so the loop
/// can look that spoke up before deciding.
pub fn registration_cluster(csr: &CertificateSigningRequest) -> Option<&str> {
    label(csr, LABEL_CLUSTER_NAME).filter(|name| !name.is_empty())
}

/// Whether the addon an addon CSR names is enabled on the cluster it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enablement {
    /// Its ManagedClusterAddOn is in the cluster's namespace.
    Enabled,
    /// There is no ManagedClusterAddOn of that name in the cluster's namespace.
    NotEnabled,
    /// Its ManagedClusterAddOn is being deleted.
    BeingDeleted,
}

/// What the hub knows about the addon an addon CSR names.
#[derive(Clone, Copy, Debug)]
pub struct AddOnRequestContext<'a> {
    pub cluster: &'a str,
    pub addon: &'a str,
    /// The AddOn document's registrations.
    pub registrations: &'a [AddOnRegistration],
    /// Whether the addon is enabled on the cluster.
    pub enablement: Enablement,
}

/// Whether a registration of the AddOn document leaves the subject to OCM's default (it names no
/// user).
fn uses_default_subject(registration: &AddOnRegistration) -> bool {
    registration
        .subject
        .as_ref()
        .is_none_or(|subject| subject.user.as_deref().is_none_or(str::is_empty))
}

/// The subject an addon's certificate must carry for one registration of the AddOn document:
/// the registration's own subject if it names a user, else OCM's default subject (DESIGN §4.3).
pub fn expected_addon_subject(
    registration: &AddOnRegistration,
    cluster: &str,
    addon: &str,
) -> Subject {
    let config = RegistrationConfig {
        signer_name: registration.signer_name.clone(),
        subject: registration.subject.as_ref().map(|subject| Subject {
            user: subject.user.clone().unwrap_or_default(),
            groups: subject.groups.clone(),
            organization_units: subject.organization_units.clone(),
        }),
    };
    config.effective_subject(cluster, addon)
}

/// What the hub writes into a ManagedClusterAddOn's `status.registrations` for the AddOn
/// document's registrations, as OCM's addon manager does: each registration's signer and the
/// subject its certificate must carry, OCM's default subject filled in where the document names
/// no user.
pub fn status_registrations(
    registrations: &[AddOnRegistration],
    cluster: &str,
    addon: &str,
) -> Vec<RegistrationConfig> {
    registrations
        .iter()
        .map(|registration| RegistrationConfig {
            signer_name: registration.signer_name.clone(),
            subject: Some(expected_addon_subject(registration, cluster, addon)),
        })
        .collect()
}

/// Whether the CSR was requested by the agent of `cluster`: a user
/// `system:open-cluster-management:<cluster>:<agent-id>` in the cluster's group, as the API
/// server recorded them in `spec.username` and `spec.groups`.
pub fn requested_by_cluster_agent(csr: &CertificateSigningRequest, cluster: &str) -> bool {
    let user_is_agent = csr
        .spec
        .username
        .as_deref()
        .and_then(|user| user.strip_prefix(&cluster_group(cluster)))
        .and_then(|rest| rest.strip_prefix(':'))
        .is_some_and(|id| !id.is_empty() && !id.contains(':'));
    let in_cluster_group = csr
        .spec
        .groups
        .as_deref()
        .unwrap_or_default()
        .contains(&cluster_group(cluster));
    user_is_agent && in_cluster_group
}

/// Decides an addon CSR against the AddOn document's registrations and the addon's enablement.
pub fn decide_addon(csr: &CertificateSigningRequest, context: AddOnRequestContext<'_>) -> Decision {
    let AddOnRequestContext {
        cluster,
        addon,
        registrations,
        enablement,
    } = context;
    if let Some(decided) = already_decided(csr) {
        return decided;
    }
    if label(csr, LABEL_ADDON_NAME) != Some(addon)
        || label(csr, LABEL_CLUSTER_NAME) != Some(cluster)
    {
        return Decision::ignore(format!(
            "not labelled as a request of addon {addon} on cluster {cluster}"
        ));
    }
    if !requested_by_cluster_agent(csr, cluster) {
        let requester = csr.spec.username.as_deref().unwrap_or_default();
        return Decision::deny(format!(
            "requested by {requester:?}, not by the agent of cluster {cluster}"
        ));
    }
    match enablement {
        Enablement::Enabled => {}
        Enablement::NotEnabled => {
            return Decision::deny(format!(
                "addon {addon} is not enabled on cluster {cluster}: there is no ManagedClusterAddOn {addon} in namespace {cluster}"
            ));
        }
        Enablement::BeingDeleted => {
            return Decision::deny(format!(
                "addon {addon} is being disabled on cluster {cluster}: ManagedClusterAddOn {cluster}/{addon} is being deleted"
            ));
        }
    }
    let signer = csr.spec.signer_name.as_str();
    let Some(registration) = registrations.iter().find(|r| r.signer_name == signer) else {
        return Decision::deny(format!(
            "addon {addon} has no registration for signer {signer}"
        ));
    };
    let subject = match read_request(&csr.spec.request.0) {
        Ok(subject) => subject,
        Err(error) => return Decision::deny(error.to_string()),
    };
    let expected = expected_addon_subject(registration, cluster, addon);
    if subject.common_name != expected.user {
        return Decision::deny(format!(
            "user {:?} is not {:?}",
            subject.common_name, expected.user
        ));
    }
    let with_authenticated = [
        expected.groups.as_slice(),
        &[AUTHENTICATED_GROUP.to_string()],
    ]
    .concat();
    let groups_allowed = same_set(&subject.organizations, &expected.groups)
        || (uses_default_subject(registration)
            && same_set(&subject.organizations, &with_authenticated));
    if !groups_allowed {
        return Decision::deny(format!(
            "groups {:?} are not {:?}",
            subject.organizations, expected.groups
        ));
    }
    if !same_set(&subject.organizational_units, &expected.organization_units) {
        return Decision::deny(format!(
            "organizational units {:?} are not {:?}",
            subject.organizational_units, expected.organization_units
        ));
    }
    if let Err(reason) = check_usages(csr) {
        return Decision::deny(reason);
    }
    Decision::approve(format!(
        "addon {addon} of cluster {cluster} registering with signer {signer}"
    ))
}

/// The condition the hub sets on a ManagedClusterAddOn whose CSR it denied, so that whoever looks
/// at the addon sees why it has no certificate: OCM's `ClusterCertificateRotated` False (the
/// condition the agent sets True once it stores a certificate), the denial as its message.
pub fn denial_condition(csr_name: &str, signer: &str, reason: &str, now: Timestamp) -> Condition {
    Condition {
        type_: CONDITION_CERTIFICATE_ROTATED.to_string(),
        status: STATUS_FALSE.to_string(),
        reason: REASON_CLIENT_CERTIFICATE_UPDATE_FAILED.to_string(),
        message: format!("the hub denied CSR {csr_name} for signer {signer}: {reason}"),
        observed_generation: None,
        last_transition_time: Time(now),
    }
}

/// The first wait between two denials of one addon registration; it doubles with every denial in
/// a row.
pub const DENY_AGAIN_DELAY: Duration = Duration::from_secs(5);
/// The longest wait between two denials of one addon registration; a registration not denied for
/// twice as long starts again from [`DENY_AGAIN_DELAY`].
pub const DENY_AGAIN_MAX: Duration = Duration::from_secs(300);

/// One addon registration on one cluster: cluster, addon and signer.
pub type RegistrationKey = (String, String, String);

/// Paces the denials of each addon registration: after one, the next waits [`DENY_AGAIN_DELAY`],
/// doubling up to [`DENY_AGAIN_MAX`], so a spoke that asks again at once for what it may not have
/// is answered at a falling rate, and its addon's condition is not rewritten in a tight loop. An
/// approval forgets the registration's denials. Approvals are never paced.
#[derive(Debug, Default)]
pub struct DenialPacer {
    recent: BTreeMap<RegistrationKey, Denied>,
}

#[derive(Debug, Clone, Copy)]
struct Denied {
    at: Timestamp,
    in_a_row: u32,
}

impl DenialPacer {
    /// Takes a denial of `key` at `now` if one may be written: `Ok` records it, `Err` says how
    /// long the denial must wait.
    pub fn try_deny(&mut self, key: &RegistrationKey, now: Timestamp) -> Result<(), Duration> {
        let forget_after = DENY_AGAIN_MAX.saturating_mul(2);
        self.recent
            .retain(|_, denied| elapsed(denied.at, now) < forget_after);
        let in_a_row = match self.recent.get(key) {
            None => 0,
            Some(denied) => {
                let delay = DENY_AGAIN_DELAY
                    .saturating_mul(2u32.saturating_pow(denied.in_a_row.saturating_sub(1).min(16)))
                    .min(DENY_AGAIN_MAX);
                let waited = elapsed(denied.at, now);
                if waited < delay {
                    return Err(delay - waited);
                }
                denied.in_a_row
            }
        };
        self.recent.insert(
            key.clone(),
            Denied {
                at: now,
                in_a_row: in_a_row.saturating_add(1),
            },
        );
        Ok(())
    }

    /// Forgets the denials of `key`: it was approved.
    pub fn approved(&mut self, key: &RegistrationKey) {
        self.recent.remove(key);
    }
}

/// How long from `then` to `now`; zero if `now` is earlier.
fn elapsed(then: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(then.duration_until(now)).unwrap_or(Duration::ZERO)
}

/// Whether `csr` is approved or denied already: nothing is left to judge of it.
pub(crate) fn is_decided(csr: &CertificateSigningRequest) -> bool {
    already_decided(csr).is_some()
}

fn already_decided(csr: &CertificateSigningRequest) -> Option<Decision> {
    let conditions = csr
        .status
        .as_ref()
        .and_then(|status| status.conditions.as_deref())
        .unwrap_or_default();
    conditions
        .iter()
        .find(|c| c.type_ == CSR_APPROVED || c.type_ == CSR_DENIED)
        .map(|c| Decision::ignore(format!("already {}", c.type_.to_lowercase())))
}

fn label<'a>(csr: &'a CertificateSigningRequest, key: &str) -> Option<&'a str> {
    csr.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn same_set(found: &[String], expected: &[String]) -> bool {
    found.len() == expected.len()
        && found.iter().collect::<BTreeSet<_>>() == expected.iter().collect::<BTreeSet<_>>()
}

/// Client auth is required; digital signature and key encipherment are allowed; nothing else.
fn check_usages(csr: &CertificateSigningRequest) -> Result<(), String> {
    let usages = csr.spec.usages.as_deref().unwrap_or_default();
    if !usages.iter().any(|usage| usage == USAGE_CLIENT_AUTH) {
        return Err(format!("usages {usages:?} lack {USAGE_CLIENT_AUTH:?}"));
    }
    match usages
        .iter()
        .find(|usage| *usage != USAGE_CLIENT_AUTH && !USAGES_ALSO_ALLOWED.contains(&usage.as_str()))
    {
        Some(extra) => Err(format!(
            "usage {extra:?} is not allowed for a client certificate"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::rotation::{CsrSubject, certificate_request_pem};
    use crate::api::fleet::RegistrationSubject;
    use crate::api::identity::OCM_IDENTITY_PREFIX;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestSpec, CertificateSigningRequestStatus,
    };
    use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256};
    use std::collections::BTreeMap;

    const CLUSTER: &str = "spoke1";

    fn request(subject: &CsrSubject) -> Vec<u8> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        certificate_request_pem(subject, &key).unwrap().into_bytes()
    }

    fn registration_subject() -> CsrSubject {
        CsrSubject {
            common_name: agent_common_name(CLUSTER, "agent-7"),
            organizations: agent_organizations(CLUSTER).to_vec(),
            organizational_units: Vec::new(),
        }
    }

    fn csr(
        subject: &CsrSubject,
        username: &str,
        labels: &[(&str, &str)],
    ) -> CertificateSigningRequest {
        CertificateSigningRequest {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("spoke1-abcde".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..Default::default()
            },
            spec: CertificateSigningRequestSpec {
                request: ByteString(request(subject)),
                signer_name: SIGNER_KUBE_APISERVER_CLIENT.into(),
                usages: Some(vec![
                    "digital signature".into(),
                    "key encipherment".into(),
                    "client auth".into(),
                ]),
                username: Some(username.into()),
                ..Default::default()
            },
            status: None,
        }
    }

    fn registration_csr(username: &str) -> CertificateSigningRequest {
        csr(
            &registration_subject(),
            username,
            &[(LABEL_CLUSTER_NAME, CLUSTER)],
        )
    }

    fn spoke() -> SpokeIdentity {
        SpokeIdentity {
            cluster: CLUSTER.into(),
            declared: true,
            accepted: true,
            bootstrap_token_ids: vec!["abc123".into()],
            auto_approval_users: Vec::new(),
            bound_users: [agent_common_name(CLUSTER, "agent-7")].into(),
        }
    }

    const BOOTSTRAP: &str = "system:bootstrap:abc123";

    #[test]
    fn a_request_read_again_reads_the_same_and_a_tampered_copy_is_refused_every_time() {
        let genuine = request(&registration_subject());
        let subject = read_request(&genuine).unwrap();
        assert_eq!(subject.common_name, agent_common_name(CLUSTER, "agent-7"));
        assert_eq!(read_request(&genuine).unwrap(), subject);
        // The same request with another cluster in its common name, its signature left as it
        // was: what was found of the genuine text says nothing of this one.
        let block = pem::parse(&genuine).unwrap();
        let mut der = block.contents().to_vec();
        let at = der
            .windows(CLUSTER.len())
            .position(|window| window == CLUSTER.as_bytes())
            .unwrap();
        der[at] ^= 0x01;
        let tampered = pem::encode(&pem::Pem::new(block.tag(), der)).into_bytes();
        for _ in 0..2 {
            assert!(
                matches!(read_request(&tampered), Err(RequestError::BadSignature)),
                "{:?}",
                read_request(&tampered)
            );
        }
        assert_eq!(read_request(&genuine).unwrap(), subject);
    }

    #[test]
    fn a_request_is_approved_only_once_its_agent_is_bound_to_its_rbac() {
        let unbound = SpokeIdentity {
            bound_users: BTreeSet::new(),
            ..spoke()
        };
        let cn = agent_common_name(CLUSTER, "agent-7");
        let auto = SpokeIdentity {
            declared: false,
            auto_approval_users: vec!["someone".into()],
            ..unbound.clone()
        };
        for (requester, spoke) in [
            (BOOTSTRAP, &unbound),
            (cn.as_str(), &unbound),
            ("someone", &auto),
        ] {
            let decision = decide_registration(&registration_csr(requester), Some(spoke));
            assert_eq!(decision.verdict, Verdict::Ignore, "{requester}");
            assert!(decision.reason.contains("not bound"), "{}", decision.reason);
            let bound = SpokeIdentity {
                bound_users: [cn.clone()].into(),
                ..spoke.clone()
            };
            let decision = decide_registration(&registration_csr(requester), Some(&bound));
            assert_eq!(decision.verdict, Verdict::Approve, "{requester}");
        }
    }

    #[test]
    fn an_accepted_undeclared_cluster_registers_only_through_an_auto_approval_user() {
        let auto = "system:bootstrap:edge99";
        let undeclared = |accepted: bool| SpokeIdentity {
            declared: false,
            accepted,
            bootstrap_token_ids: Vec::new(),
            auto_approval_users: vec![auto.to_string()],
            ..spoke()
        };
        assert_eq!(
            verdict(decide_registration(
                &registration_csr(auto),
                Some(&undeclared(true))
            )),
            Verdict::Approve
        );
        assert_eq!(
            verdict(decide_registration(
                &registration_csr(auto),
                Some(&undeclared(false))
            )),
            Verdict::Ignore,
            "not before the hub accepted the cluster"
        );
        assert_eq!(
            verdict(decide_registration(
                &registration_csr("system:bootstrap:other"),
                Some(&undeclared(true))
            )),
            Verdict::Ignore,
            "nobody else's request"
        );
    }

    fn verdict(decision: Decision) -> Verdict {
        decision.verdict
    }

    #[test]
    fn registration_with_the_spokes_own_bootstrap_token_is_approved() {
        let decision = decide_registration(&registration_csr(BOOTSTRAP), Some(&spoke()));
        assert_eq!(decision.verdict, Verdict::Approve, "{}", decision.reason);
        assert!(decision.reason.contains("agent-7"));
    }

    #[test]
    fn registration_with_another_spokes_token_is_denied() {
        let decision =
            decide_registration(&registration_csr("system:bootstrap:other9"), Some(&spoke()));
        assert_eq!(decision.verdict, Verdict::Deny);
        assert!(decision.reason.contains(BOOTSTRAP), "{}", decision.reason);
    }

    #[test]
    fn while_a_spokes_token_is_replaced_either_token_registers_it() {
        let spoke = SpokeIdentity {
            bootstrap_token_ids: vec!["abc123".into(), "new456".into()],
            ..spoke()
        };
        for requester in [BOOTSTRAP, "system:bootstrap:new456"] {
            assert_eq!(
                verdict(decide_registration(
                    &registration_csr(requester),
                    Some(&spoke)
                )),
                Verdict::Approve
            );
        }
        let denied =
            decide_registration(&registration_csr("system:bootstrap:other9"), Some(&spoke));
        assert_eq!(denied.verdict, Verdict::Deny);
        assert!(
            denied.reason.contains("system:bootstrap:new456"),
            "{}",
            denied.reason
        );
    }

    #[test]
    fn registration_of_a_spoke_without_bootstrap_token_is_denied() {
        let spoke = SpokeIdentity {
            bootstrap_token_ids: Vec::new(),
            ..spoke()
        };
        assert_eq!(
            verdict(decide_registration(
                &registration_csr(BOOTSTRAP),
                Some(&spoke)
            )),
            Verdict::Deny
        );
    }

    #[test]
    fn renewal_requested_by_the_identity_it_renews_is_approved() {
        let cn = agent_common_name(CLUSTER, "agent-7");
        let decision = decide_registration(&registration_csr(&cn), Some(&spoke()));
        assert_eq!(decision.verdict, Verdict::Approve);
        assert!(decision.reason.contains("renewal"));
    }

    #[test]
    fn renewal_requested_by_another_agent_is_denied() {
        let other = agent_common_name(CLUSTER, "agent-8");
        assert_eq!(
            verdict(decide_registration(
                &registration_csr(&other),
                Some(&spoke())
            )),
            Verdict::Deny
        );
    }

    #[test]
    fn registration_of_an_undeclared_cluster_stays_pending() {
        let undeclared = SpokeIdentity {
            declared: false,
            ..spoke()
        };
        for spoke in [None, Some(&undeclared)] {
            let decision = decide_registration(&registration_csr(BOOTSTRAP), spoke);
            assert_eq!(decision.verdict, Verdict::Ignore);
            assert!(decision.reason.contains("not declared"));
        }
    }

    #[test]
    fn registration_looked_up_under_another_name_stays_pending() {
        let elsewhere = SpokeIdentity {
            cluster: "spoke2".into(),
            ..spoke()
        };
        assert_eq!(
            verdict(decide_registration(
                &registration_csr(BOOTSTRAP),
                Some(&elsewhere)
            )),
            Verdict::Ignore
        );
    }

    #[test]
    fn registration_of_an_unaccepted_cluster_stays_pending() {
        let spoke = SpokeIdentity {
            accepted: false,
            ..spoke()
        };
        let decision = decide_registration(&registration_csr(BOOTSTRAP), Some(&spoke));
        assert_eq!(decision.verdict, Verdict::Ignore);
        assert!(decision.reason.contains("not accepted"));
    }

    #[test]
    fn registration_with_another_signer_is_not_ours() {
        let mut csr = registration_csr(BOOTSTRAP);
        csr.spec.signer_name = "kubernetes.io/kubelet-serving".into();
        assert_eq!(
            verdict(decide_registration(&csr, Some(&spoke()))),
            Verdict::Ignore
        );
    }

    #[test]
    fn csr_without_cluster_label_is_not_ours() {
        let csr = csr(&registration_subject(), BOOTSTRAP, &[]);
        assert_eq!(
            verdict(decide_registration(&csr, Some(&spoke()))),
            Verdict::Ignore
        );
        assert_eq!(registration_cluster(&csr), None);
    }

    #[test]
    fn registration_labelled_for_another_cluster_is_denied() {
        let csr = csr(
            &registration_subject(),
            BOOTSTRAP,
            &[(LABEL_CLUSTER_NAME, "spoke2")],
        );
        let spoke2 = SpokeIdentity {
            cluster: "spoke2".into(),
            ..spoke()
        };
        let decision = decide_registration(&csr, Some(&spoke2));
        assert_eq!(decision.verdict, Verdict::Deny);
        assert!(
            decision.reason.contains("common name"),
            "{}",
            decision.reason
        );
    }

    #[test]
    fn registration_with_a_foreign_common_name_is_denied() {
        for common_name in [
            "system:open-cluster-management:spoke1:",
            "system:open-cluster-management:spoke1:a:b",
            "system:open-cluster-management:spoke10:agent",
            "admin",
        ] {
            let subject = CsrSubject {
                common_name: common_name.into(),
                ..registration_subject()
            };
            let csr = csr(&subject, BOOTSTRAP, &[(LABEL_CLUSTER_NAME, CLUSTER)]);
            assert_eq!(
                verdict(decide_registration(&csr, Some(&spoke()))),
                Verdict::Deny,
                "{common_name}"
            );
        }
    }

    #[test]
    fn registration_must_carry_exactly_the_two_cluster_organizations() {
        let [own, all] = agent_organizations(CLUSTER);
        for organizations in [
            vec![own.clone()],
            vec![own.clone(), all.clone(), "system:masters".into()],
            vec![own.clone(), "system:masters".into()],
            vec![],
        ] {
            let subject = CsrSubject {
                organizations: organizations.clone(),
                ..registration_subject()
            };
            let csr = csr(&subject, BOOTSTRAP, &[(LABEL_CLUSTER_NAME, CLUSTER)]);
            assert_eq!(
                verdict(decide_registration(&csr, Some(&spoke()))),
                Verdict::Deny,
                "{organizations:?}"
            );
        }
        let reordered = CsrSubject {
            organizations: vec![all, own],
            ..registration_subject()
        };
        let csr = csr(&reordered, BOOTSTRAP, &[(LABEL_CLUSTER_NAME, CLUSTER)]);
        assert_eq!(
            verdict(decide_registration(&csr, Some(&spoke()))),
            Verdict::Approve
        );
    }

    #[test]
    fn registration_usages_must_be_client_auth() {
        let mut csr = registration_csr(BOOTSTRAP);
        csr.spec.usages = Some(vec!["client auth".into()]);
        assert_eq!(
            verdict(decide_registration(&csr, Some(&spoke()))),
            Verdict::Approve
        );
        csr.spec.usages = Some(vec!["digital signature".into()]);
        assert_eq!(
            verdict(decide_registration(&csr, Some(&spoke()))),
            Verdict::Deny
        );
        csr.spec.usages = Some(vec!["client auth".into(), "server auth".into()]);
        assert_eq!(
            verdict(decide_registration(&csr, Some(&spoke()))),
            Verdict::Deny
        );
        csr.spec.usages = None;
        assert_eq!(
            verdict(decide_registration(&csr, Some(&spoke()))),
            Verdict::Deny
        );
    }

    #[test]
    fn garbage_requests_are_denied_with_a_reason() {
        let garbage: [&[u8]; 5] = [
            b"",
            b"not pem at all",
            b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
            b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n",
            &[0xff, 0xfe, 0x00, 0x30, 0x82],
        ];
        for bytes in garbage {
            let mut csr = registration_csr(BOOTSTRAP);
            csr.spec.request = ByteString(bytes.to_vec());
            let decision = decide_registration(&csr, Some(&spoke()));
            assert_eq!(decision.verdict, Verdict::Deny, "{bytes:?}");
            assert!(!decision.reason.is_empty());
        }
    }

    #[test]
    fn request_signed_by_another_key_is_denied() {
        let mut csr = registration_csr(BOOTSTRAP);
        let block = pem::parse(&csr.spec.request.0).unwrap();
        let mut der = block.contents().to_vec();
        let last = der.len() - 1;
        der[last] ^= 0x01;
        csr.spec.request =
            ByteString(pem::encode(&pem::Pem::new("CERTIFICATE REQUEST", der)).into_bytes());
        assert_eq!(
            verdict(decide_registration(&csr, Some(&spoke()))),
            Verdict::Deny
        );
    }

    #[test]
    fn csrs_already_decided_are_left_alone() {
        for type_ in [CSR_APPROVED, CSR_DENIED] {
            let mut csr = registration_csr(BOOTSTRAP);
            csr.status = Some(CertificateSigningRequestStatus {
                conditions: Some(vec![CertificateSigningRequestCondition {
                    type_: type_.into(),
                    status: STATUS_TRUE.into(),
                    ..Default::default()
                }]),
                certificate: None,
            });
            assert_eq!(
                verdict(decide_registration(&csr, Some(&spoke()))),
                Verdict::Ignore
            );
        }
    }

    #[test]
    fn decisions_become_approved_or_denied_conditions() {
        let now = Timestamp::from_second(100).unwrap();
        let approved = decide_registration(&registration_csr(BOOTSTRAP), Some(&spoke()))
            .condition(now)
            .unwrap();
        assert_eq!(approved.type_, CSR_APPROVED);
        assert_eq!(approved.status, STATUS_TRUE);
        assert_eq!(approved.reason.as_deref(), Some(REASON_APPROVED));
        assert!(approved.message.unwrap().contains("bootstrap token"));
        let denied = Decision::deny("no").condition(now).unwrap();
        assert_eq!(
            (denied.type_.as_str(), denied.message.as_deref()),
            (CSR_DENIED, Some("no"))
        );
        assert_eq!(Decision::ignore("later").condition(now), None);
    }

    const ADDON: &str = "observability";
    const AGENT: &str = "system:open-cluster-management:spoke1:agent-7";
    const CUSTOM_SIGNER: &str = "open-cluster-management.io/observability-signer";

    fn addon_registrations() -> Vec<AddOnRegistration> {
        vec![
            AddOnRegistration {
                signer_name: SIGNER_KUBE_APISERVER_CLIENT.into(),
                subject: None,
                signer_secret_ref: None,
            },
            AddOnRegistration {
                signer_name: CUSTOM_SIGNER.into(),
                subject: Some(RegistrationSubject {
                    user: Some("observability-spoke1".into()),
                    groups: vec!["observability".into()],
                    organization_units: vec!["acm".into()],
                }),
                signer_secret_ref: None,
            },
        ]
    }

    /// The groups the API server records for `username`: an agent's are its cluster's.
    fn groups_of(username: &str) -> Vec<String> {
        let cluster = username
            .strip_prefix(OCM_IDENTITY_PREFIX)
            .and_then(|rest| rest.split(':').next());
        let mut groups = cluster
            .map(|cluster| agent_organizations(cluster).to_vec())
            .unwrap_or_default();
        groups.push(AUTHENTICATED_GROUP.into());
        groups
    }

    fn addon_csr(subject: &CsrSubject, signer: &str, username: &str) -> CertificateSigningRequest {
        let mut csr = csr(
            subject,
            username,
            &[(LABEL_CLUSTER_NAME, CLUSTER), (LABEL_ADDON_NAME, ADDON)],
        );
        csr.spec.signer_name = signer.into();
        csr.spec.groups = Some(groups_of(username));
        csr
    }

    fn default_addon_subject() -> CsrSubject {
        CsrSubject::from(&Subject::default_for(CLUSTER, ADDON))
    }

    fn custom_subject() -> CsrSubject {
        CsrSubject {
            common_name: "observability-spoke1".into(),
            organizations: vec!["observability".into()],
            organizational_units: vec!["acm".into()],
        }
    }

    fn decide_when(csr: &CertificateSigningRequest, enablement: Enablement) -> Decision {
        let registrations = addon_registrations();
        decide_addon(
            csr,
            AddOnRequestContext {
                cluster: CLUSTER,
                addon: ADDON,
                registrations: &registrations,
                enablement,
            },
        )
    }

    fn decide(csr: &CertificateSigningRequest) -> Decision {
        decide_when(csr, Enablement::Enabled)
    }

    #[test]
    fn addon_csr_with_ocms_default_subject_is_approved_with_or_without_system_authenticated() {
        let default = default_addon_subject();
        assert_eq!(
            default.common_name,
            "system:open-cluster-management:cluster:spoke1:addon:observability:agent:observability"
        );
        assert_eq!(
            default.organizations,
            [
                "system:open-cluster-management:cluster:spoke1:addon:observability",
                "system:open-cluster-management:addon:observability",
            ],
            "OCM's addon manager writes these two groups"
        );
        let mut with_authenticated = default.clone();
        with_authenticated
            .organizations
            .insert(1, AUTHENTICATED_GROUP.into());
        for subject in [default, with_authenticated] {
            let csr = addon_csr(&subject, SIGNER_KUBE_APISERVER_CLIENT, AGENT);
            let decision = decide(&csr);
            assert_eq!(
                decision.verdict,
                Verdict::Approve,
                "{subject:?}: {}",
                decision.reason
            );
        }
    }

    #[test]
    fn addon_csr_with_the_registrations_own_subject_is_approved_for_its_signer() {
        let csr = addon_csr(&custom_subject(), CUSTOM_SIGNER, AGENT);
        assert_eq!(verdict(decide(&csr)), Verdict::Approve);
    }

    #[test]
    fn a_registrations_own_subject_admits_no_extra_group() {
        let mut subject = custom_subject();
        subject.organizations.push(AUTHENTICATED_GROUP.into());
        let csr = addon_csr(&subject, CUSTOM_SIGNER, AGENT);
        assert_eq!(verdict(decide(&csr)), Verdict::Deny);
    }

    #[test]
    fn addon_csr_for_an_addon_not_enabled_or_being_disabled_is_denied() {
        let csr = addon_csr(
            &default_addon_subject(),
            SIGNER_KUBE_APISERVER_CLIENT,
            AGENT,
        );
        let not_enabled = decide_when(&csr, Enablement::NotEnabled);
        assert_eq!(not_enabled.verdict, Verdict::Deny);
        assert!(
            not_enabled.reason.contains("not enabled on cluster spoke1"),
            "{}",
            not_enabled.reason
        );
        let deleting = decide_when(&csr, Enablement::BeingDeleted);
        assert_eq!(deleting.verdict, Verdict::Deny);
        assert!(
            deleting.reason.contains("being deleted"),
            "{}",
            deleting.reason
        );
    }

    #[test]
    fn addon_csr_for_an_unregistered_signer_is_denied() {
        let csr = addon_csr(&custom_subject(), "example.com/other", AGENT);
        let decision = decide(&csr);
        assert_eq!(decision.verdict, Verdict::Deny);
        assert!(decision.reason.contains("no registration"));
    }

    #[test]
    fn addon_csr_with_another_user_is_denied() {
        let subject = CsrSubject {
            common_name: "system:admin".into(),
            ..default_addon_subject()
        };
        let csr = addon_csr(&subject, SIGNER_KUBE_APISERVER_CLIENT, AGENT);
        assert_eq!(verdict(decide(&csr)), Verdict::Deny);
    }

    #[test]
    fn addon_csr_with_other_groups_is_denied() {
        let [own, all] = [
            format!("system:open-cluster-management:cluster:{CLUSTER}:addon:{ADDON}"),
            format!("system:open-cluster-management:addon:{ADDON}"),
        ];
        for groups in [
            vec![own.clone(), all.clone(), "system:masters".into()],
            vec![
                own.clone(),
                "system:masters".into(),
                AUTHENTICATED_GROUP.into(),
            ],
            vec![own.clone(), AUTHENTICATED_GROUP.into()],
            vec![own.clone()],
            vec![
                own,
                all,
                AUTHENTICATED_GROUP.into(),
                "system:masters".into(),
            ],
        ] {
            let subject = CsrSubject {
                organizations: groups.clone(),
                ..default_addon_subject()
            };
            let csr = addon_csr(&subject, SIGNER_KUBE_APISERVER_CLIENT, AGENT);
            let decision = decide(&csr);
            assert_eq!(decision.verdict, Verdict::Deny, "{groups:?}");
            assert!(decision.reason.contains("groups"));
        }
    }

    #[test]
    fn addon_csr_with_other_organizational_units_is_denied() {
        for units in [vec![], vec!["acm".to_string(), "ops".to_string()]] {
            let subject = CsrSubject {
                organizational_units: units,
                ..custom_subject()
            };
            let csr = addon_csr(&subject, CUSTOM_SIGNER, AGENT);
            assert_eq!(verdict(decide(&csr)), Verdict::Deny);
        }
    }

    #[test]
    fn addon_csr_from_someone_else_than_the_clusters_agent_is_denied() {
        for requester in [
            "system:open-cluster-management:spoke2:agent-1",
            "system:open-cluster-management:spoke1:agent-1:extra",
            "system:bootstrap:abc123",
            "",
        ] {
            let csr = addon_csr(
                &default_addon_subject(),
                SIGNER_KUBE_APISERVER_CLIENT,
                requester,
            );
            assert_eq!(verdict(decide(&csr)), Verdict::Deny, "{requester}");
        }
        // An addon's own identity on another cluster named `cluster` has the agent's prefix but
        // not its group.
        let mut csr = addon_csr(
            &default_addon_subject(),
            SIGNER_KUBE_APISERVER_CLIENT,
            AGENT,
        );
        csr.spec.groups = Some(vec![
            "system:open-cluster-management:cluster:spoke9:addon:observability".into(),
        ]);
        assert!(!requested_by_cluster_agent(&csr, CLUSTER));
        assert_eq!(verdict(decide(&csr)), Verdict::Deny);
    }

    #[test]
    fn addon_csr_for_another_addon_or_cluster_is_not_judged_here() {
        let mut csr = addon_csr(
            &default_addon_subject(),
            SIGNER_KUBE_APISERVER_CLIENT,
            AGENT,
        );
        csr.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(LABEL_ADDON_NAME.into(), "other".into());
        assert_eq!(verdict(decide(&csr)), Verdict::Ignore);
        assert_eq!(
            verdict(decide_registration(&csr, Some(&spoke()))),
            Verdict::Ignore,
            "an addon CSR is never taken for a registration"
        );
    }

    #[test]
    fn garbage_addon_request_is_denied() {
        let mut csr = addon_csr(
            &default_addon_subject(),
            SIGNER_KUBE_APISERVER_CLIENT,
            AGENT,
        );
        csr.spec.request = ByteString(
            b"-----BEGIN CERTIFICATE REQUEST-----\n-----END CERTIFICATE REQUEST-----\n".to_vec(),
        );
        assert_eq!(verdict(decide(&csr)), Verdict::Deny);
    }

    #[test]
    fn registration_subject_without_user_falls_back_to_the_default() {
        let registration = AddOnRegistration {
            signer_name: SIGNER_KUBE_APISERVER_CLIENT.into(),
            subject: Some(RegistrationSubject {
                user: None,
                groups: vec!["ignored".into()],
                organization_units: Vec::new(),
            }),
            signer_secret_ref: None,
        };
        assert_eq!(
            expected_addon_subject(&registration, CLUSTER, ADDON),
            Subject::default_for(CLUSTER, ADDON)
        );
    }

    #[test]
    fn status_registrations_carry_each_signer_and_the_subject_it_must_ask_for() {
        let written = status_registrations(&addon_registrations(), CLUSTER, ADDON);
        assert_eq!(
            written,
            [
                RegistrationConfig {
                    signer_name: SIGNER_KUBE_APISERVER_CLIENT.into(),
                    subject: Some(Subject::default_for(CLUSTER, ADDON)),
                },
                RegistrationConfig {
                    signer_name: CUSTOM_SIGNER.into(),
                    subject: Some(Subject {
                        user: "observability-spoke1".into(),
                        groups: vec!["observability".into()],
                        organization_units: vec!["acm".into()],
                    }),
                },
            ]
        );
    }

    #[test]
    fn a_denial_becomes_the_addons_certificate_condition() {
        let now = Timestamp::from_second(100).unwrap();
        let condition = denial_condition("addon-spoke1-x", CUSTOM_SIGNER, "groups are wrong", now);
        assert_eq!(condition.type_, CONDITION_CERTIFICATE_ROTATED);
        assert_eq!(condition.status, STATUS_FALSE);
        assert_eq!(condition.reason, REASON_CLIENT_CERTIFICATE_UPDATE_FAILED);
        assert!(condition.message.contains("addon-spoke1-x"));
        assert!(condition.message.contains("groups are wrong"));
    }

    fn key() -> RegistrationKey {
        (CLUSTER.into(), ADDON.into(), CUSTOM_SIGNER.into())
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).unwrap()
    }

    #[test]
    fn denials_of_one_registration_wait_longer_and_longer() {
        let mut pacer = DenialPacer::default();
        assert_eq!(pacer.try_deny(&key(), at(0)), Ok(()));
        assert_eq!(pacer.try_deny(&key(), at(1)), Err(Duration::from_secs(4)));
        assert_eq!(pacer.try_deny(&key(), at(5)), Ok(()));
        assert_eq!(pacer.try_deny(&key(), at(6)), Err(Duration::from_secs(9)));
        assert_eq!(pacer.try_deny(&key(), at(15)), Ok(()));
        assert_eq!(pacer.try_deny(&key(), at(15)), Err(Duration::from_secs(20)));
        let other = (
            CLUSTER.into(),
            ADDON.into(),
            SIGNER_KUBE_APISERVER_CLIENT.into(),
        );
        assert_eq!(
            pacer.try_deny(&other, at(15)),
            Ok(()),
            "each registration apart"
        );
    }

    #[test]
    fn denial_waits_never_exceed_five_minutes_and_end_with_an_approval_or_quiet() {
        let mut pacer = DenialPacer::default();
        let mut now = 0;
        for _ in 0..12 {
            while let Err(wait) = pacer.try_deny(&key(), at(now)) {
                assert!(wait <= DENY_AGAIN_MAX);
                now += i64::try_from(wait.as_secs()).unwrap();
            }
        }
        assert_eq!(
            pacer.try_deny(&key(), at(now + 1)),
            Err(DENY_AGAIN_MAX - Duration::from_secs(1))
        );
        pacer.approved(&key());
        assert_eq!(pacer.try_deny(&key(), at(now + 1)), Ok(()));
        assert_eq!(pacer.try_deny(&key(), at(now + 601)), Ok(()), "forgotten");
        assert_eq!(
            pacer.try_deny(&key(), at(now + 602)),
            Err(Duration::from_secs(4)),
            "starts again from the first delay"
        );
    }
}

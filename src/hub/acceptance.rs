//! Whether the hub accepts a cluster, and which certificates speak for an accepted one (DESIGN
//! §4.1). Pure: the accept loop gathers the facts and does what this module says.
//!
//! **Acceptance.** fleetform accepts a cluster when git declares it (a Spoke of its name), when a
//! Hub's `registration.autoApproval.users` lists the requester of one of its registration CSRs
//! (OCM's ManagedClusterAutoApproval: accepted once, marked with OCM's annotation, so a later
//! denial stands), and, as OCM's hub does, when a person allowed to `update
//! managedclusters/accept` sets `hubAcceptsClient: true` (`clusteradm accept`): such a cluster is
//! not in git, which a Warning Event says once; fleetform keeps it joined and never prunes it.
//! That last one rests on the hub's API server checking who sets the field (fleetform's own
//! admission in the control planes it runs, OCM's registration webhook on a real hub:
//! [`AcceptCheck`]); where nothing checks it, anyone who may create a ManagedCluster (every
//! bootstrap token holder) could set it, so `hubAcceptsClient: true` alone is not enough. A
//! cluster that asks to join and is none of these stays un-accepted, and the loop says so once.
//!
//! **Join identities.** An accepted cluster's RBAC binds the users (common names) of the
//! registration certificates approved for its current join, not the cluster's group: a
//! certificate issued before the cluster was last unjoined names the same group and would
//! otherwise regain every right when a cluster of the same name joins again. A join is one
//! ManagedCluster object (its uid); its users are the common names of the approved registration
//! CSRs created since that object was, kept in a record across CSR cleanup (kube-controller-manager
//! deletes approved CSRs after an hour) and a denial. A renewal keeps the common name, so a
//! rotated certificate keeps its rights.
//!
//! **Bound before issued.** The common name of a registration CSR still pending is bound too, and
//! recorded as pending (it goes from the record once its CSR is denied or gone): the approval
//! loop approves a request only once the record names its user ([`JoinRecord::bound`]), so an
//! agent's first requests with its new certificate are never refused. A name bound before its
//! certificate exists grants nothing: only an approved request is signed.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use serde::{Deserialize, Serialize};

use super::approval::{read_request, registration_cluster};
use crate::api::identity::cluster_group;
use crate::api::vocabulary::{
    CSR_APPROVED, CSR_DENIED, CSR_FAILED, LABEL_ADDON_NAME, SIGNER_KUBE_APISERVER_CLIENT,
};

/// OCM's annotation on a ManagedCluster that auto-approval accepted once (RFC 3339 time).
pub const ANNOTATION_AUTOMATICALLY_ACCEPTED_ON: &str =
    "open-cluster-management.io/automatically-accepted-on";
/// Annotation on a cluster's namespace: the users of this join, as a [`JoinRecord`] (JSON).
pub const ANNOTATION_JOIN_USERS: &str = "fleetform.io/join-users";
/// Reason of the Event about a cluster that asked to join and is not in git.
pub const REASON_NOT_IN_GIT: &str = "NotInGit";

/// What makes sure that only a user allowed to `update managedclusters/accept` (in
/// `register.open-cluster-management.io`) sets `hubAcceptsClient: true` on the hub, on which
/// honouring a person's acceptance rests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AcceptCheck {
    /// fleetform's own ManagedCluster admission, in the control plane it runs in process
    /// (`fleetform up`, the tests): always in force.
    InProcess,
    /// OCM's registration webhook, registered on the hub as
    /// [`OCM_MANAGED_CLUSTER_VALIDATOR`], looked for each time a person's acceptance is to be
    /// honoured ([`webhook_checks_accept`]); without it, none is.
    #[default]
    Webhook,
}

/// The name of OCM's ManagedCluster validating webhook (and of its configuration), which checks
/// who may accept a cluster; fleetform's in-process admission bears it too.
pub const OCM_MANAGED_CLUSTER_VALIDATOR: &str =
    "managedclustervalidators.admission.cluster.open-cluster-management.io";

/// Whether `config` (the hub's [`OCM_MANAGED_CLUSTER_VALIDATOR`] configuration) sends every
/// create and update of a ManagedCluster to OCM's webhook, and fails the write when it cannot
/// answer. By name only: another webhook that sees every write (a policy engine's) checks
/// nothing of acceptance.
pub fn webhook_checks_accept(config: &ValidatingWebhookConfiguration) -> bool {
    let names = |values: &Option<Vec<String>>, wanted: &str| {
        values.iter().flatten().any(|value| value == wanted)
    };
    config
        .webhooks
        .iter()
        .flatten()
        .filter(|webhook| webhook.name == OCM_MANAGED_CLUSTER_VALIDATOR)
        .filter(|webhook| webhook.failure_policy.as_deref().unwrap_or("Fail") == "Fail")
        .flat_map(|webhook| webhook.rules.iter().flatten())
        .any(|rule| {
            names(&rule.api_groups, CLUSTER_GROUP)
                && names(&rule.resources, "managedclusters")
                && (names(&rule.operations, "*")
                    || (names(&rule.operations, "CREATE") && names(&rule.operations, "UPDATE")))
        })
}

/// OCM's API group of ManagedClusters.
const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";

/// What the accept loop knows about one ManagedCluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// `spec.hubAcceptsClient`.
    pub hub_accepts_client: Option<bool>,
    /// HubAcceptedManagedCluster is True: this hub accepted this cluster before (only the hub
    /// writes it while a cluster is not accepted).
    pub accepted_before: bool,
    /// A Spoke of the cluster's name is declared in git.
    pub declared: bool,
    /// The cluster carries [`ANNOTATION_AUTOMATICALLY_ACCEPTED_ON`].
    pub auto_accepted_before: bool,
    /// A user of a Hub's `autoApproval.users` requested a registration CSR of this cluster.
    pub auto_approved: bool,
    /// The hub's API server lets only a user allowed to accept set `hubAcceptsClient`
    /// ([`AcceptCheck`]): when it is set, a person so allowed accepted the cluster.
    pub accept_checked: bool,
}

/// What the accept loop does with a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acceptance {
    /// Namespace, RBAC for this join's users, lease; HubAcceptedManagedCluster True.
    Accept,
    /// Auto-approval: set `hubAcceptsClient: true` and [`ANNOTATION_AUTOMATICALLY_ACCEPTED_ON`]
    /// (the pass that follows accepts).
    AutoAccept,
    /// Remove the RBAC; HubAcceptedManagedCluster False (denied).
    Revoke,
    /// Accepted by a person allowed to, and not in git: [`Acceptance::Accept`], and a Warning
    /// Event once that the cluster is not in git (fleetform leaves it as it is).
    AcceptNotInGit,
    /// Neither in git nor auto-approved nor accepted by a person allowed to: nothing is granted,
    /// and the loop reports it once.
    NotInGit,
    /// Declared, and waiting for the lifecycle reconciler to set `hubAcceptsClient`.
    Wait,
}

/// What to do with a cluster.
pub fn decide(facts: &Facts) -> Acceptance {
    let allowed = facts.declared || facts.accepted_before || facts.auto_approved;
    match facts.hub_accepts_client {
        Some(true) if allowed => Acceptance::Accept,
        Some(true) if facts.accept_checked => Acceptance::AcceptNotInGit,
        _ if facts.auto_approved && !facts.auto_accepted_before => Acceptance::AutoAccept,
        Some(true) => Acceptance::NotInGit,
        Some(false) => Acceptance::Revoke,
        None if facts.accepted_before => Acceptance::Revoke,
        None if facts.declared => Acceptance::Wait,
        None => Acceptance::NotInGit,
    }
}

/// Whether `csr` is a registration request of `cluster` requested by one of `users`.
pub fn requested_by_one_of(
    csr: &CertificateSigningRequest,
    cluster: &str,
    users: &[String],
) -> bool {
    is_registration_of(csr, cluster)
        && csr
            .spec
            .username
            .as_ref()
            .is_some_and(|requester| users.contains(requester))
}

fn is_registration_of(csr: &CertificateSigningRequest, cluster: &str) -> bool {
    registration_cluster(csr) == Some(cluster)
        && csr.spec.signer_name == SIGNER_KUBE_APISERVER_CLIENT
        && csr
            .metadata
            .labels
            .as_ref()
            .is_none_or(|labels| !labels.contains_key(LABEL_ADDON_NAME))
}

/// The users of one join, as kept on the cluster's namespace: written once their RBAC is
/// bound.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRecord {
    /// The uid of the ManagedCluster of this join.
    pub cluster: String,
    /// The common names of its approved registration requests.
    pub users: BTreeSet<String>,
    /// The common names of its registration requests still pending, bound ahead of approval.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub pending: BTreeSet<String>,
    /// The users of earlier joins of this name, never bound to this one: a cluster unjoined
    /// and joined again within the second its old request was made in would otherwise count
    /// that request (creation times have whole seconds) and bind its old certificate again.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub earlier: BTreeSet<String>,
}

impl JoinRecord {
    /// The record in the annotation `text`, if it is one of the join of the ManagedCluster
    /// `uid`; a record of an earlier join binds no one to this one, and its users are
    /// [`Self::earlier`] (one that does not parse counts for nothing).
    pub fn of_join(text: Option<&str>, uid: &str) -> JoinRecord {
        match text.and_then(|text| serde_json::from_str::<JoinRecord>(text).ok()) {
            Some(record) if record.cluster == uid => record,
            Some(record) => JoinRecord {
                cluster: uid.to_string(),
                earlier: record
                    .earlier
                    .into_iter()
                    .chain(record.users)
                    .chain(record.pending)
                    .collect(),
                ..JoinRecord::default()
            },
            None => JoinRecord::default(),
        }
    }

    /// Every user this join's RBAC is bound to: approved and pending.
    pub fn bound(&self) -> BTreeSet<String> {
        self.users.union(&self.pending).cloned().collect()
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The record of `cluster`'s join (the ManagedCluster `uid`, created at `since`): the users
/// already `recorded` for it and the common name of every registration CSR of the cluster
/// created since then that was approved (and neither denied nor failed); pending, the common
/// name of each such CSR not decided yet. Only subjects that name an agent of this cluster
/// count.
pub fn join_users<'a>(
    (cluster, uid): (&str, &str),
    since: k8s_openapi::jiff::Timestamp,
    csrs: impl IntoIterator<Item = &'a CertificateSigningRequest>,
    recorded: BTreeSet<String>,
) -> JoinRecord {
    let agent_prefix = format!("{}:", cluster_group(cluster));
    let mut users = recorded;
    let mut pending = BTreeSet::new();
    for csr in csrs {
        let created = csr.metadata.creation_timestamp.as_ref().map(|time| time.0);
        let conditions = csr
            .status
            .as_ref()
            .and_then(|status| status.conditions.as_deref())
            .unwrap_or_default();
        let has = |type_: &str| conditions.iter().any(|c| c.type_ == type_);
        if !is_registration_of(csr, cluster)
            || created.is_none_or(|created| created < since)
            || has(CSR_DENIED)
            || has(CSR_FAILED)
        {
            continue;
        }
        let Ok(subject) = read_request(&csr.spec.request.0) else {
            continue;
        };
        let agent = subject.common_name.strip_prefix(&agent_prefix);
        if !agent.is_some_and(|agent| !agent.is_empty() && !agent.contains(':')) {
            continue;
        }
        if has(CSR_APPROVED) {
            users.insert(subject.common_name);
        } else {
            pending.insert(subject.common_name);
        }
    }
    pending.retain(|user| !users.contains(user));
    JoinRecord {
        cluster: uid.to_string(),
        users,
        pending,
        earlier: BTreeSet::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition, CertificateSigningRequestSpec,
        CertificateSigningRequestStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    use crate::agent::rotation::registration_csr;
    use crate::api::vocabulary::LABEL_CLUSTER_NAME;

    fn facts(hub_accepts_client: Option<bool>) -> Facts {
        Facts {
            hub_accepts_client,
            ..Facts::default()
        }
    }

    #[test]
    fn only_declared_previously_accepted_or_auto_approved_clusters_are_accepted() {
        let declared = Facts {
            declared: true,
            ..facts(Some(true))
        };
        assert_eq!(decide(&declared), Acceptance::Accept);
        assert_eq!(
            decide(&Facts {
                hub_accepts_client: None,
                ..declared.clone()
            }),
            Acceptance::Wait
        );
        // Where nothing checks who sets hubAcceptsClient, anyone may have: not accepted.
        assert_eq!(decide(&facts(Some(true))), Acceptance::NotInGit);
        // Where the API server checks it, a person allowed to accept did, as OCM honours.
        let by_a_person = Facts {
            accept_checked: true,
            ..facts(Some(true))
        };
        assert_eq!(decide(&by_a_person), Acceptance::AcceptNotInGit);
        assert_eq!(
            decide(&Facts {
                hub_accepts_client: None,
                ..by_a_person.clone()
            }),
            Acceptance::NotInGit,
            "asking is not being accepted"
        );
        assert_eq!(
            decide(&Facts {
                hub_accepts_client: Some(false),
                accepted_before: true,
                ..by_a_person
            }),
            Acceptance::Revoke,
            "a person's denial stands"
        );
        assert_eq!(decide(&facts(None)), Acceptance::NotInGit);
        let accepted = Facts {
            accepted_before: true,
            ..facts(Some(true))
        };
        assert_eq!(decide(&accepted), Acceptance::Accept);
        assert_eq!(
            decide(&Facts {
                hub_accepts_client: None,
                ..accepted
            }),
            Acceptance::Revoke
        );
        assert_eq!(decide(&facts(Some(false))), Acceptance::Revoke);
    }

    #[test]
    fn auto_approval_accepts_once_and_a_later_denial_stands() {
        let requested = Facts {
            auto_approved: true,
            ..facts(None)
        };
        assert_eq!(decide(&requested), Acceptance::AutoAccept);
        let accepted = Facts {
            hub_accepts_client: Some(true),
            auto_accepted_before: true,
            ..requested.clone()
        };
        assert_eq!(decide(&accepted), Acceptance::Accept);
        let denied = Facts {
            hub_accepts_client: Some(false),
            accepted_before: true,
            ..accepted
        };
        assert_eq!(decide(&denied), Acceptance::Revoke);
    }

    fn csr(
        cluster: &str,
        agent: &str,
        created: i64,
        conditions: &[&str],
    ) -> CertificateSigningRequest {
        let mut csr = registration_csr(cluster, agent, None).unwrap().csr;
        csr.metadata = ObjectMeta {
            creation_timestamp: Some(Time(Timestamp::from_second(created).unwrap())),
            ..csr.metadata
        };
        csr.status = Some(CertificateSigningRequestStatus {
            conditions: Some(
                conditions
                    .iter()
                    .map(|type_| CertificateSigningRequestCondition {
                        type_: type_.to_string(),
                        status: "True".into(),
                        ..CertificateSigningRequestCondition::default()
                    })
                    .collect(),
            ),
            ..CertificateSigningRequestStatus::default()
        });
        csr
    }

    #[test]
    fn a_join_binds_the_agents_approved_since_it_began_and_keeps_those_recorded() {
        let since = Timestamp::from_second(1_000).unwrap();
        let mut addon = csr("c1", "addon", 1_100, &[CSR_APPROVED]);
        addon
            .metadata
            .labels
            .get_or_insert_default()
            .insert(LABEL_ADDON_NAME.into(), "hello".into());
        let mut other_label = csr("c1", "relabelled", 1_100, &[CSR_APPROVED]);
        other_label
            .metadata
            .labels
            .get_or_insert_default()
            .insert(LABEL_CLUSTER_NAME.into(), "c2".into());
        let mut unreadable = csr("c1", "garbled", 1_100, &[CSR_APPROVED]);
        unreadable.spec = CertificateSigningRequestSpec {
            request: ByteString(b"not a request".to_vec()),
            ..unreadable.spec
        };
        let csrs = [
            csr("c1", "now", 1_000, &[CSR_APPROVED]),
            csr("c1", "earlier", 999, &[CSR_APPROVED]),
            csr("c1", "pending", 1_100, &[]),
            csr("c1", "denied", 1_100, &[CSR_DENIED]),
            csr("c1", "failed", 1_100, &[CSR_APPROVED, CSR_FAILED]),
            csr("c2", "elsewhere", 1_100, &[CSR_APPROVED]),
            addon,
            other_label,
            unreadable,
        ];
        let recorded = BTreeSet::from(["system:open-cluster-management:c1:cleaned".to_string()]);
        let record = join_users(("c1", "uid-1"), since, &csrs, recorded);
        assert_eq!(record.cluster, "uid-1");
        assert_eq!(
            record.users.iter().collect::<Vec<_>>(),
            [
                "system:open-cluster-management:c1:cleaned",
                "system:open-cluster-management:c1:now"
            ]
        );
        // The pending request's user is bound before its certificate is issued.
        assert_eq!(
            record.pending.iter().collect::<Vec<_>>(),
            ["system:open-cluster-management:c1:pending"]
        );
        assert_eq!(record.bound().len(), 3);
    }

    #[test]
    fn a_pending_user_goes_from_the_record_once_its_request_is_denied_and_stays_once_approved() {
        let since = Timestamp::from_second(1_000).unwrap();
        let pending = join_users(
            ("c1", "uid-1"),
            since,
            &[csr("c1", "a", 1_100, &[])],
            BTreeSet::new(),
        );
        assert!(
            pending
                .bound()
                .contains("system:open-cluster-management:c1:a")
        );
        let denied = join_users(
            ("c1", "uid-1"),
            since,
            &[csr("c1", "a", 1_100, &[CSR_DENIED])],
            pending.users.clone(),
        );
        assert!(denied.bound().is_empty());
        let approved = join_users(
            ("c1", "uid-1"),
            since,
            &[csr("c1", "a", 1_100, &[CSR_APPROVED])],
            pending.users,
        );
        assert_eq!(approved.users.len(), 1);
        assert!(approved.pending.is_empty());
        // Cleaned up an hour later, the approved user stays bound.
        let cleaned = join_users(("c1", "uid-1"), since, &[], approved.users);
        assert_eq!(cleaned.bound().len(), 1);
    }

    #[test]
    fn a_record_counts_only_for_its_own_join() {
        let record = JoinRecord {
            cluster: "uid-1".into(),
            users: BTreeSet::from(["u".to_string()]),
            pending: BTreeSet::from(["p".to_string()]),
            earlier: BTreeSet::new(),
        };
        let text = record.to_annotation();
        assert_eq!(JoinRecord::of_join(Some(&text), "uid-1"), record);
        let next = JoinRecord::of_join(Some(&text), "uid-2");
        assert!(next.bound().is_empty());
        assert_eq!(
            next.earlier,
            BTreeSet::from(["p".to_string(), "u".to_string()])
        );
        assert!(
            JoinRecord::of_join(Some("{not json"), "uid-1")
                .bound()
                .is_empty()
        );
        assert!(JoinRecord::of_join(None, "uid-1").bound().is_empty());
        // A record written before pending users were kept reads as one with none.
        let older = r#"{"cluster":"uid-1","users":["u"]}"#;
        assert_eq!(JoinRecord::of_join(Some(older), "uid-1").bound().len(), 1);
    }

    fn webhook(
        name: &str,
        failure_policy: Option<&str>,
        operations: &[&str],
    ) -> ValidatingWebhookConfiguration {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": OCM_MANAGED_CLUSTER_VALIDATOR},
            "webhooks": [{
                "name": name,
                "failurePolicy": failure_policy,
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"service": {"namespace": "open-cluster-management-hub", "name": "cluster-manager-registration-webhook"}},
                "rules": [{"apiGroups": ["cluster.open-cluster-management.io"], "apiVersions": ["*"],
                           "operations": operations, "resources": ["managedclusters"]}],
            }],
        }))
        .unwrap()
    }

    #[test]
    fn only_ocms_webhook_seeing_every_write_of_a_managed_cluster_and_failing_closed_checks_acceptance()
     {
        let ocm = OCM_MANAGED_CLUSTER_VALIDATOR;
        assert!(webhook_checks_accept(&webhook(
            ocm,
            None,
            &["CREATE", "UPDATE"]
        )));
        assert!(webhook_checks_accept(&webhook(ocm, Some("Fail"), &["*"])));
        assert!(!webhook_checks_accept(&webhook(
            ocm,
            Some("Ignore"),
            &["CREATE", "UPDATE"]
        )));
        assert!(!webhook_checks_accept(&webhook(ocm, None, &["UPDATE"])));
        assert!(
            !webhook_checks_accept(&webhook(
                "validate.kyverno.svc-fail",
                Some("Fail"),
                &["CREATE", "UPDATE"]
            )),
            "a policy engine's webhook checks nothing of acceptance"
        );
    }

    #[test]
    fn auto_approval_matches_the_requester_the_api_server_recorded() {
        let mut request = csr("c1", "a", 1, &[]);
        request.spec.username = Some("system:bootstrap:abc123".into());
        let users = ["system:bootstrap:abc123".to_string()];
        assert!(requested_by_one_of(&request, "c1", &users));
        assert!(!requested_by_one_of(&request, "c2", &users));
        assert!(!requested_by_one_of(
            &request,
            "c1",
            &["someone".to_string()]
        ));
    }
}

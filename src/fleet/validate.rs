//! Semantic validation: the rules a schema cannot express, across documents.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::names::{did_you_mean, dns1123_label_error, dns1123_subdomain_error, signer_name_error};
use super::{Diagnostic, DocumentRef, Documents, Fleet, Kind, Located};
use crate::api::fleet::{KubeconfigSource, RolloutSpec, RolloutStrategy};
use crate::api::vocabulary::{
    SIGNER_KUBE_APISERVER_CLIENT, TAINT_TERMINATING, TAINT_UNAVAILABLE, TAINT_UNREACHABLE,
    TAINT_WORKLOAD_CLEANUP,
};

/// Taints the hub loops and the reconciler own; git may not set them.
const MANAGED_TAINTS: [&str; 4] = [
    TAINT_UNREACHABLE,
    TAINT_UNAVAILABLE,
    TAINT_TERMINATING,
    TAINT_WORKLOAD_CLEANUP,
];

/// The rules [`check`] applies beyond each document's schema, by kind and the field they are
/// said at (`spec.addons[]` for each item of a list), in a user's words: the fleet repo reference
/// lists them beside the schema's own. A check added here gets its line.
pub const RULES: &[(Kind, &str, &str)] = &[
    (
        Kind::Hub,
        "metadata.name",
        "unique among Hubs; a DNS-1123 subdomain",
    ),
    (
        Kind::Hub,
        "spec.kubeconfig",
        "exactly one of `context`, `secretRef`, `inCluster`, `embedded`",
    ),
    (
        Kind::Hub,
        "spec.caBundle",
        "PEM holding at least one certificate; not with `caBundleSecretRef`",
    ),
    (
        Kind::Hub,
        "spec.rollout.strategy",
        "`Groups` needs `groups`",
    ),
    (
        Kind::Hub,
        "spec.rollout.groups",
        "only with `strategy: Groups`",
    ),
    (
        Kind::Hub,
        "spec.rollout.maxConcurrency",
        "not with `strategy: All`",
    ),
    (
        Kind::Hub,
        "spec.rollout.groups[]",
        "chooses spokes: `selector.matchLabels`, `spokes`, or both",
    ),
    (
        Kind::Hub,
        "spec.rollout.groups[].name",
        "unique among the rollout's groups",
    ),
    (
        Kind::Hub,
        "spec.rollout.groups[].spokes[]",
        "names a Spoke of this hub",
    ),
    (
        Kind::Spoke,
        "metadata.name",
        "unique among Spokes; a DNS-1123 label (it becomes a namespace on the hub)",
    ),
    (
        Kind::Spoke,
        "metadata.labels",
        "not `cluster.open-cluster-management.io/clusterset`: that is `spec.clusterSet`",
    ),
    (Kind::Spoke, "spec.hubRef", "names a Hub of the fleet"),
    (
        Kind::Spoke,
        "spec.kubeconfig",
        "exactly one of `context`, `secretRef`, `inCluster`, `embedded`; not its hub's `context` or `secretRef`",
    ),
    (
        Kind::Spoke,
        "spec.kubeconfig.inCluster",
        "at most one Spoke of a hub (the hub registered as its own spoke)",
    ),
    (
        Kind::Spoke,
        "spec.addons[]",
        "names an AddOn of the fleet, once",
    ),
    (
        Kind::Spoke,
        "spec.addons[].installNamespace",
        "a DNS-1123 label",
    ),
    (
        Kind::Spoke,
        "spec.taints[].key",
        "not a taint fleetform sets itself (`cluster.open-cluster-management.io/unreachable`, `…/unavailable`, `fleetform.io/terminating`, `fleetform.io/workload-cleanup`)",
    ),
    (
        Kind::AddOn,
        "metadata.name",
        "unique among AddOns; a DNS-1123 label",
    ),
    (Kind::AddOn, "spec.installNamespace", "a DNS-1123 label"),
    (
        Kind::AddOn,
        "spec.registrations[].signerName",
        "a signer name, `domain/path`; one registration per signer",
    ),
    (
        Kind::AddOn,
        "spec.registrations[].signerSecretRef",
        "required for a custom signer, refused for `kubernetes.io/kube-apiserver-client`",
    ),
    (
        Kind::AddOn,
        "spec.rollout.strategy",
        "`Groups` needs `groups`",
    ),
    (
        Kind::AddOn,
        "spec.rollout.groups",
        "only with `strategy: Groups`",
    ),
    (
        Kind::AddOn,
        "spec.rollout.maxConcurrency",
        "not with `strategy: All`",
    ),
    (
        Kind::AddOn,
        "spec.rollout.groups[]",
        "chooses spokes: `selector.matchLabels`, `spokes`, or both",
    ),
    (
        Kind::AddOn,
        "spec.rollout.groups[].name",
        "unique among the rollout's groups",
    ),
    (
        Kind::AddOn,
        "spec.rollout.groups[].spokes[]",
        "names a Spoke of the fleet",
    ),
];

/// Checks the documents against each other and builds the fleet from those that are unique.
pub(super) fn check(documents: Documents, diagnostics: &mut Vec<Diagnostic>) -> Fleet {
    let Documents {
        hubs,
        spokes,
        addons,
        broken_names,
        salvaged: _,
    } = documents;
    let mut fleet = Fleet::default();

    let hubs = unique(Kind::Hub, hubs, &mut fleet, diagnostics);
    let spokes = unique(Kind::Spoke, spokes, &mut fleet, diagnostics);
    let addons = unique(Kind::AddOn, addons, &mut fleet, diagnostics);

    // Names a reference may resolve to: valid documents and those that failed their schema.
    let names_of = |kind: Kind, valid: Vec<&String>| -> BTreeSet<String> {
        let broken = broken_names
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, name)| name);
        broken.chain(valid).cloned().collect()
    };
    let hub_names = names_of(Kind::Hub, hubs.iter().map(|hub| &hub.name).collect());
    let addon_names = names_of(
        Kind::AddOn,
        addons.iter().map(|addon| &addon.name).collect(),
    );

    for hub in &hubs {
        if let Some(problem) = dns1123_subdomain_error(&hub.name) {
            diagnostics.push(hub.origin.at(
                "/metadata/name",
                format!("Hub name {:?} {problem}", hub.name),
            ));
        }
        check_kubeconfig(&hub.value.spec.kubeconfig, hub, diagnostics);
        check_ca_bundle(&hub.value.spec, hub, diagnostics);
    }

    let hubs_by_name: HashMap<&str, &Located<_>> =
        hubs.iter().map(|hub| (hub.name.as_str(), hub)).collect();
    let mut hub_as_spoke: HashMap<&str, &Located<_>> = HashMap::new();
    for spoke in &spokes {
        let spec = &spoke.value.spec;
        if let Some(problem) = dns1123_label_error(&spoke.name) {
            diagnostics.push(spoke.origin.at(
                "/metadata/name",
                format!(
                    "Spoke name {:?} {problem}; it becomes a namespace on the hub",
                    spoke.name
                ),
            ));
        }
        check_kubeconfig(&spec.kubeconfig, spoke, diagnostics);
        if spoke
            .value
            .metadata
            .labels
            .as_ref()
            .is_some_and(|labels| labels.contains_key(crate::api::vocabulary::LABEL_CLUSTER_SET))
        {
            diagnostics.push(spoke.origin.at(
                &format!(
                    "/metadata/labels/{}",
                    crate::api::vocabulary::LABEL_CLUSTER_SET.replace('/', "~1")
                ),
                "the cluster set is spec.clusterSet, not a label".to_string(),
            ));
        }

        if !hub_names.contains(&spec.hub_ref) {
            let hint = did_you_mean(&spec.hub_ref, hub_names.iter().map(String::as_str));
            diagnostics.push(spoke.origin.at(
                "/spec/hubRef",
                format!("hubRef {:?} names no Hub{hint}", spec.hub_ref),
            ));
        }
        if spec.is_hub_as_spoke() {
            if let Some(first) = hub_as_spoke.insert(&spec.hub_ref, spoke) {
                hub_as_spoke.insert(&spec.hub_ref, first);
                diagnostics.push(spoke.origin.at(
                    "/spec/kubeconfig/inCluster",
                    format!(
                        "hub {:?} already has a hub-as-spoke: Spoke {:?} at {}; a hub registers as a spoke at most once",
                        spec.hub_ref,
                        first.name,
                        first.origin.location("/spec/kubeconfig/inCluster")
                    ),
                ));
            }
        } else if let Some(hub) = hubs_by_name.get(spec.hub_ref.as_str())
            && same_cluster(&spec.kubeconfig, &hub.value.spec.kubeconfig)
        {
            diagnostics.push(spoke.origin.at(
                "/spec/kubeconfig",
                format!(
                    "points at the cluster of its hub {:?}; register a hub as its own spoke with kubeconfig.inCluster: true",
                    spec.hub_ref
                ),
            ));
        }

        let mut seen_addons = BTreeMap::new();
        for (index, addon) in spec.addons.iter().enumerate() {
            let pointer = match addon {
                crate::api::fleet::SpokeAddon::Name(_) => format!("/spec/addons/{index}"),
                crate::api::fleet::SpokeAddon::Configured(_) => {
                    format!("/spec/addons/{index}/name")
                }
            };
            let name = addon.name();
            if !addon_names.contains(name) {
                let hint = did_you_mean(name, addon_names.iter().map(String::as_str));
                diagnostics.push(
                    spoke
                        .origin
                        .at(&pointer, format!("addon {name:?} names no AddOn{hint}")),
                );
            }
            if let Some(first) = seen_addons.insert(name, index) {
                seen_addons.insert(name, first);
                diagnostics.push(spoke.origin.at(
                    &pointer,
                    format!("addon {name:?} is listed twice (first at /spec/addons/{first})"),
                ));
            }
            if let Some(namespace) = addon.install_namespace()
                && let Some(problem) = dns1123_label_error(namespace)
            {
                diagnostics.push(spoke.origin.at(
                    &format!("/spec/addons/{index}/installNamespace"),
                    format!("installNamespace {namespace:?} {problem}"),
                ));
            }
        }

        for (index, taint) in spec.taints.iter().enumerate() {
            if MANAGED_TAINTS.contains(&taint.key.as_str()) {
                diagnostics.push(spoke.origin.at(
                    &format!("/spec/taints/{index}/key"),
                    format!(
                        "taint {:?} is managed by fleetform and cannot be set in git",
                        taint.key
                    ),
                ));
            }
        }
    }

    for hub in &hubs {
        let of_hub = spokes
            .iter()
            .filter(|spoke| spoke.value.spec.hub_ref == hub.name)
            .map(|spoke| spoke.name.as_str());
        check_rollout(
            &hub.value.spec.rollout,
            of_hub.collect(),
            "of this hub",
            hub,
            diagnostics,
        );
    }

    for addon in &addons {
        if let Some(problem) = dns1123_label_error(&addon.name) {
            diagnostics.push(addon.origin.at(
                "/metadata/name",
                format!("AddOn name {:?} {problem}", addon.name),
            ));
        }
        let spec = &addon.value.spec;
        if let Some(rollout) = &spec.rollout {
            let all_spokes = spokes.iter().map(|spoke| spoke.name.as_str()).collect();
            check_rollout(rollout, all_spokes, "of the fleet", addon, diagnostics);
        }
        if let Some(problem) = dns1123_label_error(&spec.install_namespace) {
            diagnostics.push(addon.origin.at(
                "/spec/installNamespace",
                format!("installNamespace {:?} {problem}", spec.install_namespace),
            ));
        }
        let mut signers = BTreeMap::new();
        for (index, registration) in spec.registrations.iter().enumerate() {
            let pointer = format!("/spec/registrations/{index}");
            let signer = registration.signer_name.as_str();
            if let Some(problem) = signer_name_error(signer) {
                diagnostics.push(addon.origin.at(
                    &format!("{pointer}/signerName"),
                    format!("signerName {signer:?} {problem}"),
                ));
            }
            if let Some(first) = signers.insert(signer, index) {
                signers.insert(signer, first);
                diagnostics.push(addon.origin.at(
                    &format!("{pointer}/signerName"),
                    format!("signerName {signer:?} is registered twice (first at /spec/registrations/{first}); one registration per signer"),
                ));
            }
            let custom = signer != SIGNER_KUBE_APISERVER_CLIENT;
            match (&registration.signer_secret_ref, custom) {
                (None, true) => diagnostics.push(addon.origin.at(
                    &pointer,
                    format!("custom signer {signer:?} needs signerSecretRef naming the hub Secret with its CA"),
                )),
                (Some(_), false) => diagnostics.push(addon.origin.at(
                    &format!("{pointer}/signerSecretRef"),
                    format!("signerSecretRef is only for custom signers; {SIGNER_KUBE_APISERVER_CLIENT} is signed by the hub's own CA"),
                )),
                _ => {}
            }
        }
    }

    fleet.hubs = hubs.into_iter().map(|hub| (hub.name, *hub.value)).collect();
    fleet.spokes = spokes
        .into_iter()
        .map(|spoke| (spoke.name, spoke.value))
        .collect();
    fleet.addons = addons
        .into_iter()
        .map(|addon| (addon.name, *addon.value))
        .collect();
    fleet
}

/// Keeps the first document of each name, reports the others, and records where each kept one is.
fn unique<T>(
    kind: Kind,
    documents: Vec<Located<T>>,
    fleet: &mut Fleet,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Located<T>> {
    let mut documents = documents;
    documents
        .sort_by(|a, b| (&a.origin.file, a.origin.index).cmp(&(&b.origin.file, b.origin.index)));
    let mut kept: Vec<Located<T>> = Vec::with_capacity(documents.len());
    let mut first: HashMap<String, usize> = HashMap::new();
    for document in documents {
        if let Some(&index) = first.get(&document.name) {
            // Only now is the first definition's line worth looking up.
            let defined_at = kept[index].origin.location("/metadata/name");
            diagnostics.push(document.origin.at(
                "/metadata/name",
                format!(
                    "duplicate {kind} {:?}: already defined at {defined_at}",
                    document.name
                ),
            ));
            continue;
        }
        first.insert(document.name.clone(), kept.len());
        fleet.locations.insert(
            (kind, document.name.clone()),
            DocumentRef {
                file: document.origin.file.clone(),
                document: document.origin.index,
            },
        );
        kept.push(document);
    }
    kept
}

/// A hub's or an addon's rollout: groups exactly with `strategy: Groups`, each choosing spokes
/// (by labels or names of `spokes`, the spokes it concerns: `whose` says which), under a name of
/// its own.
fn check_rollout<T>(
    rollout: &RolloutSpec,
    spokes: BTreeSet<&str>,
    whose: &str,
    hub: &Located<T>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let grouped = rollout.strategy == RolloutStrategy::Groups;
    if grouped && rollout.groups.is_empty() {
        diagnostics.push(hub.origin.at(
            "/spec/rollout/strategy",
            "strategy Groups needs groups: [{name, selector: {matchLabels}, spokes}] in rollout order".to_string(),
        ));
    }
    if !grouped && !rollout.groups.is_empty() {
        diagnostics.push(hub.origin.at(
            "/spec/rollout/groups",
            format!(
                "groups are read only with strategy: Groups (this rollout is {:?})",
                rollout.strategy
            ),
        ));
    }
    if rollout.strategy == RolloutStrategy::All && rollout.max_concurrency.is_some() {
        diagnostics.push(hub.origin.at(
            "/spec/rollout/maxConcurrency",
            "strategy All moves every spoke at once; set strategy: Progressive or Groups for maxConcurrency to apply".to_string(),
        ));
    }
    let mut names = BTreeMap::new();
    for (index, group) in rollout.groups.iter().enumerate() {
        let pointer = format!("/spec/rollout/groups/{index}");
        if let Some(first) = names.insert(group.name.as_str(), index) {
            names.insert(group.name.as_str(), first);
            diagnostics.push(hub.origin.at(
                &format!("{pointer}/name"),
                format!(
                    "group {:?} is defined twice (first at /spec/rollout/groups/{first})",
                    group.name
                ),
            ));
        }
        let selects = group
            .selector
            .as_ref()
            .is_some_and(|selector| !selector.match_labels.is_empty());
        if !selects && group.spokes.is_empty() {
            diagnostics.push(hub.origin.at(
                &pointer,
                format!(
                    "group {:?} chooses no spoke: set selector.matchLabels, spokes, or both",
                    group.name
                ),
            ));
        }
        for (at, spoke) in group.spokes.iter().enumerate() {
            if !spokes.contains(spoke.as_str()) {
                let hint = did_you_mean(spoke, spokes.iter().copied());
                diagnostics.push(hub.origin.at(
                    &format!("{pointer}/spokes/{at}"),
                    format!("spoke {spoke:?} names no Spoke {whose}{hint}"),
                ));
            }
        }
    }
}

/// A hub's CA bundle: inline or from a Secret, not both; inline, PEM certificates.
fn check_ca_bundle<T>(
    spec: &crate::api::fleet::HubSpec,
    hub: &Located<T>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    if spec.ca_bundle.is_some() && spec.ca_bundle_secret_ref.is_some() {
        diagnostics.push(hub.origin.at(
            "/spec/caBundleSecretRef",
            "set caBundle or caBundleSecretRef, not both".to_string(),
        ));
    }
    if let Some(bundle) = &spec.ca_bundle {
        let certificates = pem::parse_many(bundle).map(|blocks| {
            blocks
                .iter()
                .filter(|block| block.tag() == "CERTIFICATE")
                .count()
        });
        if !matches!(certificates, Ok(n) if n > 0) {
            diagnostics.push(hub.origin.at(
                "/spec/caBundle",
                "caBundle holds no PEM certificate (-----BEGIN CERTIFICATE----- ...)".to_string(),
            ));
        }
    }
}

fn check_kubeconfig<T>(
    kubeconfig: &KubeconfigSource,
    document: &Located<T>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let sources = kubeconfig.sources();
    let problem = match sources.len() {
        1 => return,
        0 => "sets none".to_string(),
        n => format!("sets {n}: {}", sources.join(", ")),
    };
    diagnostics.push(document.origin.at(
        "/spec/kubeconfig",
        format!("kubeconfig must set exactly one of context, secretRef, inCluster, embedded; it {problem}"),
    ));
}

/// Whether two kubeconfig sources name the same cluster (same context or same secret key).
fn same_cluster(a: &KubeconfigSource, b: &KubeconfigSource) -> bool {
    (a.context.is_some() && a.context == b.context)
        || (a.secret_ref.is_some() && a.secret_ref == b.secret_ref)
}

//! What the agent reports about its spoke in the ManagedCluster's status (seed 003, DESIGN §4.4):
//! the ClusterClaims, and the summary of the spoke's nodes.
//!
//! Claims: reserved names (`id.k8s.io`, `kubeversion.open-cluster-management.io`,
//! `platform.open-cluster-management.io`, `product.open-cluster-management.io`) come first, sorted
//! and never cut; custom claims follow sorted by name, cut once the total reaches
//! `clusterClaimsMax` (seed 003: "once the total number of the ClusterClaims exceeds" it), and
//! what was cut is returned so the loop can say so in an Event. Claims labelled
//! `open-cluster-management.io/spoke-only` are never reported.
//!
//! Nodes: `capacity` and `allocatable` are summed over schedulable nodes only (a cordoned node's
//! resources cannot be placed on); the health summary (ready, PID/memory/disk pressure) counts
//! every node, as seed 002's node health does.
//!
//! This module decides what to report; it must not read claims or nodes or write status.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::ClusterClaim;
use crate::api::cluster::NodeHealth;
use crate::api::cluster::{ManagedClusterClaim, ManagedClusterVersion};
use crate::api::vocabulary::is_reserved_claim;

/// The claims to report and the custom claims left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimSelection {
    /// `status.clusterClaims`: reserved claims, then custom claims, each group sorted by name.
    pub reported: Vec<ManagedClusterClaim>,
    /// Names of the custom claims cut by `clusterClaimsMax`, sorted.
    pub cut: Vec<String>,
}

impl ClaimSelection {
    /// The note of the Event that tells about cut claims, `None` when nothing was cut.
    pub fn cut_note(&self, max: usize) -> Option<String> {
        (!self.cut.is_empty()).then(|| {
            format!(
                "{} custom cluster claims exceed clusterClaimsMax {max} and are not reported: {}",
                self.cut.len(),
                self.cut.join(", ")
            )
        })
    }
}

/// Selects the claims to report from all ClusterClaims of the spoke. `max` is the spoke's
/// `clusterClaimsMax`: the most claims reported in all, though reserved claims are never cut.
pub fn select_claims(claims: &[ClusterClaim], max: usize) -> ClaimSelection {
    let (mut reserved, mut custom): (Vec<_>, Vec<_>) = claims
        .iter()
        .filter(|claim| !claim.is_spoke_only())
        .map(ClusterClaim::to_reported)
        .partition(|claim| is_reserved_claim(&claim.name));
    reserved.sort();
    custom.sort();
    let room = max.saturating_sub(reserved.len());
    let cut = custom
        .split_off(room.min(custom.len()))
        .into_iter()
        .map(|claim| claim.name)
        .collect();
    reserved.append(&mut custom);
    ClaimSelection {
        reported: reserved,
        cut,
    }
}

/// The spoke's `clusterClaimsMax` as a count: negative values (which validation rejects) are 0.
pub fn claims_max(cluster_claims_max: i32) -> usize {
    usize::try_from(cluster_claims_max).unwrap_or(0)
}

/// What the agent reports about the spoke's version and nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeSummary {
    /// `status.version`.
    pub version: ManagedClusterVersion,
    /// `status.capacity`: summed over schedulable nodes.
    pub capacity: BTreeMap<String, Quantity>,
    /// `status.allocatable`: summed over schedulable nodes.
    pub allocatable: BTreeMap<String, Quantity>,
    /// Health of every node.
    pub health: NodeHealth,
    /// Quantities that could not be read (`<node>: <resource>=<value>`) and were left out of
    /// the sums, for a warning.
    pub unreadable: Vec<String>,
}

/// Summarises the spoke from its API server's version (`gitVersion`, e.g. `v1.34.1`) and its
/// nodes.
pub fn summarize_nodes(server_version: Option<&str>, nodes: &[Node]) -> NodeSummary {
    let mut capacity = ResourceSums::default();
    let mut allocatable = ResourceSums::default();
    let mut unreadable = Vec::new();
    for node in nodes {
        let schedulable = !node
            .spec
            .as_ref()
            .and_then(|spec| spec.unschedulable)
            .unwrap_or(false);
        let Some(status) = node.status.as_ref().filter(|_| schedulable) else {
            continue;
        };
        let name = node.metadata.name.as_deref().unwrap_or("<unnamed node>");
        for (sums, resources) in [
            (&mut capacity, &status.capacity),
            (&mut allocatable, &status.allocatable),
        ] {
            for (resource, quantity) in resources.iter().flatten() {
                if sums.add(resource, &quantity.0).is_none() {
                    unreadable.push(format!("{name}: {resource}={}", quantity.0));
                }
            }
        }
    }
    NodeSummary {
        version: ManagedClusterVersion {
            kubernetes: server_version
                .filter(|version| !version.is_empty())
                .map(str::to_string),
        },
        capacity: capacity.into_quantities(),
        allocatable: allocatable.into_quantities(),
        health: NodeHealth::from_nodes(nodes),
        unreadable,
    }
}

/// Per-resource sums of quantities, exact to the nano-unit (Kubernetes' own precision).
#[derive(Default)]
struct ResourceSums(BTreeMap<String, (i128, Notation)>);

impl ResourceSums {
    /// Adds a quantity; `None` if it cannot be read (then the sum is unchanged). The first
    /// quantity of a resource decides how the sum is written, as Kubernetes' `Quantity.Add` does.
    fn add(&mut self, resource: &str, quantity: &str) -> Option<()> {
        let (nanos, notation) = parse_quantity(quantity)?;
        let entry = self.0.entry(resource.to_string()).or_insert((0, notation));
        entry.0 = entry.0.checked_add(nanos)?;
        Some(())
    }

    fn into_quantities(self) -> BTreeMap<String, Quantity> {
        self.0
            .into_iter()
            .map(|(resource, (nanos, notation))| {
                (resource, Quantity(format_quantity(nanos, notation)))
            })
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Notation {
    /// `Ki`, `Mi`, ... (memory, storage).
    Binary,
    /// `m`, `k`, `M`, ... or none (CPU, pods); also `e<n>` exponents, written back as decimal.
    Decimal,
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const BINARY_SUFFIXES: [(&str, u32); 6] = [
    ("Ki", 1),
    ("Mi", 2),
    ("Gi", 3),
    ("Ti", 4),
    ("Pi", 5),
    ("Ei", 6),
];
const DECIMAL_SUFFIXES: [(&str, i32); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

/// Reads a Kubernetes quantity (`250m`, `1.5Gi`, `110`, `1e3`) as nano-units, rounding up below
/// a nano-unit as Kubernetes does. `None` for anything else or anything too large.
fn parse_quantity(text: &str) -> Option<(i128, Notation)> {
    let text = text.trim();
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let (negative, digits) = match number.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, number.strip_prefix('+').unwrap_or(number)),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let all_digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !all_digits(whole) || !all_digits(fraction) {
        return None;
    }
    let mantissa: i128 = format!("{whole}{fraction}").parse().ok()?;
    let fraction_digits = i32::try_from(fraction.len()).ok()?;
    let (binary_power, decimal_exponent, notation) = if let Some((_, power)) =
        BINARY_SUFFIXES.iter().find(|(name, _)| *name == suffix)
    {
        (*power, 0, Notation::Binary)
    } else if let Some((_, exponent)) = DECIMAL_SUFFIXES.iter().find(|(name, _)| *name == suffix) {
        (0, *exponent, Notation::Decimal)
    } else {
        let exponent = suffix.strip_prefix(['e', 'E'])?.parse::<i32>().ok()?;
        (0, exponent, Notation::Decimal)
    };
    let exponent = decimal_exponent + 9 - fraction_digits;
    if !(-40..=30).contains(&exponent) {
        return None;
    }
    let scaled = mantissa.checked_mul(1024_i128.checked_pow(binary_power)?)?;
    let nanos = if exponent >= 0 {
        scaled.checked_mul(10_i128.checked_pow(exponent.unsigned_abs())?)?
    } else {
        let divisor = 10_i128.checked_pow(exponent.unsigned_abs())?;
        scaled.checked_add(divisor - 1)? / divisor
    };
    Some((if negative { -nanos } else { nanos }, notation))
}

/// Writes nano-units the way Kubernetes canonicalises a quantity: binary sums in the largest
/// `Ki`..`Ei` unit that divides them (plain bytes otherwise), decimal ones with the largest
/// `n`..`E` suffix that keeps an integer (`2k`, `1500m`, `18`).
fn format_quantity(nanos: i128, notation: Notation) -> String {
    if nanos == 0 {
        return "0".to_string();
    }
    if notation == Notation::Binary && nanos % NANOS_PER_UNIT == 0 {
        let units = nanos / NANOS_PER_UNIT;
        if let Some((suffix, power)) = BINARY_SUFFIXES
            .iter()
            .rev()
            .find(|(_, power)| units % 1024_i128.pow(*power) == 0)
        {
            return format!("{}{suffix}", units / 1024_i128.pow(*power));
        }
        return units.to_string();
    }
    let (suffix, exponent) = DECIMAL_SUFFIXES
        .iter()
        .rev()
        .find(|(_, exponent)| nanos % 10_i128.pow((exponent + 9).unsigned_abs()) == 0)
        .unwrap_or(&("n", -9));
    format!(
        "{}{suffix}",
        nanos / 10_i128.pow((exponent + 9).unsigned_abs())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::cluster::ClusterClaimSpec;
    use crate::api::vocabulary::{
        CLAIM_ID, CLAIM_KUBE_VERSION, CLAIM_PLATFORM, CLAIM_PRODUCT, LABEL_SPOKE_ONLY,
    };
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
    use kube::ResourceExt;

    fn claim(name: &str) -> ClusterClaim {
        ClusterClaim::new(
            name,
            ClusterClaimSpec {
                value: format!("value of {name}"),
            },
        )
    }

    fn spoke_only(name: &str) -> ClusterClaim {
        let mut claim = claim(name);
        claim
            .labels_mut()
            .insert(LABEL_SPOKE_ONLY.into(), "true".into());
        claim
    }

    fn names(selection: &ClaimSelection) -> Vec<&str> {
        selection
            .reported
            .iter()
            .map(|claim| claim.name.as_str())
            .collect()
    }

    #[test]
    fn reserved_claims_come_first_then_custom_claims_each_sorted() {
        let claims = [
            claim("version.openshift.io"),
            claim(CLAIM_PRODUCT),
            claim("consoleurl.openshift.io"),
            claim(CLAIM_ID),
            claim("id.openshift.io"),
            claim(CLAIM_PLATFORM),
            claim(CLAIM_KUBE_VERSION),
        ];
        let selection = select_claims(&claims, 20);
        assert_eq!(
            names(&selection),
            [
                CLAIM_ID,
                CLAIM_KUBE_VERSION,
                CLAIM_PLATFORM,
                CLAIM_PRODUCT,
                "consoleurl.openshift.io",
                "id.openshift.io",
                "version.openshift.io",
            ]
        );
        assert_eq!(selection.reported[0].value, "value of id.k8s.io");
        assert!(selection.cut.is_empty());
        assert_eq!(selection.cut_note(20), None);
    }

    #[test]
    fn custom_claims_are_cut_at_the_maximum_by_name() {
        let claims = [
            claim("c"),
            claim("a"),
            claim(CLAIM_ID),
            claim("d"),
            claim("b"),
        ];
        // The reserved claim counts towards the maximum of three: two custom claims fit.
        let selection = select_claims(&claims, 3);
        assert_eq!(names(&selection), [CLAIM_ID, "a", "b"]);
        assert_eq!(selection.cut, ["c", "d"]);
        let note = selection.cut_note(3).unwrap();
        assert!(
            note.contains("c, d") && note.contains("clusterClaimsMax 3"),
            "{note}"
        );
    }

    #[test]
    fn reserved_claims_are_never_cut() {
        let claims = [
            claim(CLAIM_PRODUCT),
            claim(CLAIM_ID),
            claim(CLAIM_PLATFORM),
            claim(CLAIM_KUBE_VERSION),
            claim("custom"),
        ];
        // Four reserved claims over a maximum of two: all four stay, no room for custom ones.
        let selection = select_claims(&claims, 2);
        assert_eq!(
            names(&selection),
            [CLAIM_ID, CLAIM_KUBE_VERSION, CLAIM_PLATFORM, CLAIM_PRODUCT]
        );
        assert_eq!(selection.cut, ["custom"]);
    }

    #[test]
    fn spoke_only_claims_are_never_reported_nor_counted() {
        let claims = [
            spoke_only("a-secret"),
            claim("b"),
            spoke_only(CLAIM_PLATFORM),
            claim("c"),
        ];
        let selection = select_claims(&claims, 2);
        assert_eq!(names(&selection), ["b", "c"]);
        assert!(selection.cut.is_empty());
    }

    #[test]
    fn negative_claims_max_reports_reserved_claims_only() {
        assert_eq!(claims_max(-1), 0);
        assert_eq!(claims_max(20), 20);
    }

    fn node(name: &str, unschedulable: bool, resources: &[(&str, &str)], ready: &str) -> Node {
        let quantities: BTreeMap<String, Quantity> = resources
            .iter()
            .map(|(resource, value)| (resource.to_string(), Quantity(value.to_string())))
            .collect();
        Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                unschedulable: Some(unschedulable),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                capacity: Some(quantities.clone()),
                allocatable: Some(quantities),
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn capacity_and_allocatable_sum_schedulable_nodes_only() {
        let nodes = [
            node(
                "a",
                false,
                &[("cpu", "8"), ("memory", "16Gi"), ("pods", "110")],
                "True",
            ),
            node(
                "b",
                false,
                &[("cpu", "2500m"), ("memory", "8Gi"), ("pods", "110")],
                "True",
            ),
            node(
                "cordoned",
                true,
                &[("cpu", "64"), ("memory", "512Gi"), ("pods", "110")],
                "True",
            ),
        ];
        let summary = summarize_nodes(Some("v1.34.1"), &nodes);
        let expected: BTreeMap<String, Quantity> =
            [("cpu", "10500m"), ("memory", "24Gi"), ("pods", "220")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                .collect();
        assert_eq!(summary.capacity, expected);
        assert_eq!(summary.allocatable, expected);
        assert_eq!(summary.version.kubernetes.as_deref(), Some("v1.34.1"));
        assert_eq!(summary.health.total, 3, "health counts every node");
        assert!(summary.unreadable.is_empty());
    }

    #[test]
    fn node_summary_counts_ready_nodes() {
        let nodes = [
            node("a", false, &[], "True"),
            node("b", false, &[], "False"),
            node("c", true, &[], "Unknown"),
        ];
        let summary = summarize_nodes(None, &nodes);
        assert_eq!((summary.health.ready, summary.health.total), (1, 3));
        assert_eq!(summary.version.kubernetes, None);
        assert!(summary.capacity.is_empty());
    }

    #[test]
    fn unreadable_quantities_are_left_out_and_named() {
        let nodes = [
            node("a", false, &[("cpu", "4"), ("memory", "lots")], "True"),
            node("b", false, &[("cpu", "4"), ("memory", "1Gi")], "True"),
        ];
        let summary = summarize_nodes(None, &nodes);
        assert_eq!(summary.capacity["cpu"], Quantity("8".into()));
        assert_eq!(summary.capacity["memory"], Quantity("1Gi".into()));
        assert_eq!(
            summary.unreadable,
            ["a: memory=lots", "a: memory=lots"],
            "once for capacity, once for allocatable"
        );
    }

    fn sum(quantities: &[&str]) -> String {
        let mut sums = ResourceSums::default();
        for quantity in quantities {
            sums.add("r", quantity).unwrap();
        }
        sums.into_quantities()["r"].0.clone()
    }

    #[test]
    fn quantities_sum_exactly_in_kubernetes_notation() {
        assert_eq!(sum(&["4", "8", "2"]), "14");
        assert_eq!(sum(&["1500m", "500m"]), "2");
        assert_eq!(sum(&["1000", "1000"]), "2k");
        assert_eq!(sum(&["250m", "100m"]), "350m");
        assert_eq!(sum(&["8127940Ki", "8127940Ki"]), "16255880Ki");
        assert_eq!(sum(&["1Gi", "512Mi"]), "1536Mi");
        assert_eq!(sum(&["1.5Gi"]), "1536Mi");
        assert_eq!(sum(&["1000Ki", "24"]), "1024024");
        assert_eq!(sum(&["100", "1Ki"]), "1124");
        assert_eq!(sum(&["1e3", "1"]), "1001");
        assert_eq!(sum(&["0", "0Mi"]), "0");
        assert_eq!(sum(&["0.5", "0.25"]), "750m");
        assert_eq!(sum(&["1n"]), "1n");
        assert_eq!(sum(&["0.1n"]), "1n", "rounded up to a nano-unit");
        assert_eq!(sum(&["1E", "1E"]), "2E");
    }

    #[test]
    fn malformed_quantities_are_rejected() {
        for text in [
            "",
            "Gi",
            "1.2.3",
            "1Zi",
            "1e",
            "--1",
            "1e400",
            "99999999999999999999999999999999999Ei",
            ".",
        ] {
            assert_eq!(parse_quantity(text), None, "{text:?}");
        }
    }
}

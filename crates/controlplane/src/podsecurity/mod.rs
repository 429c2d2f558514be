//! PodSecurity admission, as kube-apiserver v1.36 runs it with its default configuration (every
//! level `privileged:latest` unless a namespace's labels say otherwise, no exemptions).
//!
//! A namespace's `pod-security.kubernetes.io/enforce`, `warn` and `audit` labels (and their
//! `-version`s) set its levels ([`policy`]). A Pod that violates `enforce` is refused; one that
//! violates `warn` is admitted with a warning; a workload's pod template only ever gets warnings;
//! labels that name no level are refused on the namespace; and a namespace given a stricter
//! `enforce` warns about the pods it already holds. `audit` only annotates kube-apiserver's audit
//! log, which this server does not keep: its labels are checked, nothing more.
//!
//! Pure: labels and objects (JSON) in, verdicts and kube-apiserver's words out. The rules
//! themselves are [`checks`]'; [`crate::pod_admission`] reads the store for them.

pub mod checks;

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde_json::{Map, Value, json};

use crate::error::FieldError;
pub use checks::Violation;

const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";
/// At most this many of a namespace's pods are judged when its `enforce` level changes.
const MAX_PODS_TO_CHECK: usize = 3000;

/// A Pod Security Standard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    fn parse(s: &str) -> Option<Level> {
        match s {
            "privileged" => Some(Level::Privileged),
            "baseline" => Some(Level::Baseline),
            "restricted" => Some(Level::Restricted),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// The Kubernetes version whose rules a level means: `latest`, or `v1.N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    Latest,
    Minor(u32),
}

impl Version {
    fn parse(s: &str) -> Option<Version> {
        if s == "latest" {
            return Some(Version::Latest);
        }
        let minor = s.strip_prefix("v1.")?;
        let canonical = minor == "0" || !minor.starts_with('0');
        if minor.is_empty() || !canonical || !minor.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        minor.parse().ok().map(Version::Minor)
    }

    /// The minor version whose rules apply.
    fn minor(self) -> u32 {
        match self {
            Version::Latest => checks::NEWEST_MINOR,
            Version::Minor(m) => m,
        }
    }
}

/// A level at a version, written `restricted:latest` or `baseline:v1.24`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    pub level: Level,
    pub version: Version,
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.version {
            Version::Latest => write!(f, "{}:latest", self.level.as_str()),
            Version::Minor(m) => write!(f, "{}:v1.{m}", self.level.as_str()),
        }
    }
}

const PRIVILEGED: LevelVersion = LevelVersion {
    level: Level::Privileged,
    version: Version::Latest,
};

/// A namespace's levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub enforce: LevelVersion,
    pub audit: LevelVersion,
    pub warn: LevelVersion,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            enforce: PRIVILEGED,
            audit: PRIVILEGED,
            warn: PRIVILEGED,
        }
    }
}

impl Policy {
    fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }
}

/// The levels a namespace's labels set, and what is wrong with those labels (each a field
/// error on `metadata.labels[<label>]`, as kube-apiserver reports them). A level that names no
/// level enforces `restricted` (failing closed) but warns and audits at `privileged`; a version
/// that is not one means `latest`. Without `warn`, warnings follow a stricter `enforce`.
pub fn policy(labels: Option<&Value>) -> (Policy, Vec<FieldError>) {
    let mut p = Policy::default();
    let mut errors = Vec::new();
    let Some(labels) = labels.and_then(Value::as_object).filter(|l| !l.is_empty()) else {
        return (p, errors);
    };
    let label = |mode: &str| {
        labels
            .get(&format!("{LABEL_PREFIX}{mode}"))
            .map(|v| v.as_str().unwrap_or(""))
    };
    let mut bad = |mode: &str, value: &str, message: &str| {
        errors.push(FieldError::invalid(
            format!("metadata.labels[{LABEL_PREFIX}{mode}]"),
            &json!(value),
            message,
        ))
    };
    const BAD_LEVEL: &str = "must be one of privileged, baseline, restricted";
    const BAD_VERSION: &str = "must be \"latest\" or \"v1.x\"";
    let mut enforce_set = false;
    for (mode, failed) in [
        ("enforce", Level::Restricted),
        ("audit", Level::Privileged),
        ("warn", Level::Privileged),
    ] {
        let lv = match mode {
            "enforce" => &mut p.enforce,
            "audit" => &mut p.audit,
            _ => &mut p.warn,
        };
        if let Some(value) = label(mode) {
            match Level::parse(value) {
                Some(level) => {
                    lv.level = level;
                    enforce_set |= mode == "enforce";
                }
                None => {
                    lv.level = failed;
                    bad(mode, value, BAD_LEVEL);
                }
            }
        }
        let version_label = format!("{mode}-version");
        if let Some(value) = label(&version_label) {
            match Version::parse(value) {
                Some(version) => lv.version = version,
                None => {
                    lv.version = Version::Latest;
                    bad(&version_label, value, BAD_VERSION);
                }
            }
        }
    }
    if label("warn").is_none() && enforce_set && p.enforce.level > p.warn.level {
        p.warn.level = p.enforce.level;
        if label("warn-version").is_none() {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errors)
}

/// What `lv` finds wrong with a pod (its metadata and spec).
pub fn evaluate(lv: LevelVersion, metadata: &Value, spec: &Value) -> Vec<Violation> {
    checks::violations(lv.level, lv.version.minor(), metadata, spec)
}

/// `reason (detail), reason`: how a refusal or warning lists what a pod violates.
fn details(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| match v.detail.as_str() {
            "" => v.reason.clone(),
            d => format!("{} ({d})", v.reason),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A pod's or template's verdict: refused with this reason, or admitted with these warnings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Why the Pod is refused (`violates PodSecurity "restricted:latest": ...`), to follow
    /// `pods "<name>" is forbidden: `.
    Refused(String),
    Admitted(Vec<String>),
}

/// How a pod (`enforced`: a Pod, not a template) fares in a namespace with `policy`.
pub fn judge(policy: &Policy, metadata: &Value, spec: &Value, enforced: bool) -> Verdict {
    let nothing_to_do = if enforced {
        policy.fully_privileged()
    } else {
        policy.warn.level == Level::Privileged
    };
    if nothing_to_do {
        return Verdict::Admitted(Vec::new());
    }
    let mut seen: BTreeMap<String, Vec<Violation>> = BTreeMap::new();
    let mut at = |lv: LevelVersion| {
        seen.entry(lv.to_string())
            .or_insert_with(|| evaluate(lv, metadata, spec))
            .clone()
    };
    if enforced {
        let violations = at(policy.enforce);
        if !violations.is_empty() {
            return Verdict::Refused(format!(
                "violates PodSecurity \"{}\": {}",
                policy.enforce,
                details(&violations)
            ));
        }
    }
    let violations = at(policy.warn);
    if violations.is_empty() {
        return Verdict::Admitted(Vec::new());
    }
    Verdict::Admitted(vec![format!(
        "would violate PodSecurity \"{}\": {}",
        policy.warn,
        details(&violations)
    )])
}

/// Whether a Pod update is worth judging again: kube-apiserver judges it only when a container
/// is added or removed or changes its image (little else of a pod's spec may change).
pub fn significant_pod_update(old: &Value, new: &Value) -> bool {
    let images = |pod: &Value, list: &str| -> Vec<Option<Value>> {
        pod.pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .map(|cs| cs.iter().map(|c| c.get("image").cloned()).collect())
            .unwrap_or_default()
    };
    if ["containers", "initContainers"]
        .iter()
        .any(|l| images(old, l) != images(new, l))
    {
        return true;
    }
    let ephemeral = |pod: &Value| -> Vec<(Option<Value>, Option<Value>)> {
        pod.pointer("/spec/ephemeralContainers")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| (c.get("name").cloned(), c.get("image").cloned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = ephemeral(old);
    ephemeral(new).iter().any(|c| !before.contains(c))
}

/// What a namespace's new labels come to: refused with these field errors, or admitted, with
/// the `enforce` level its existing pods must now be judged against when that got stricter.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelChange {
    Invalid(Vec<FieldError>),
    Admitted(Option<LevelVersion>),
}

/// Judges a namespace's labels on create (`old` None) or update: labels naming no level or
/// version are refused (on update, only if they changed what is wrong); an `enforce` level
/// made stricter, or given another version, is to be checked against the pods already there.
pub fn label_change(new: Option<&Value>, old: Option<Option<&Value>>) -> LabelChange {
    let (policy_new, errors_new) = policy(new);
    let Some(old) = old else {
        if errors_new.is_empty() {
            return LabelChange::Admitted(None);
        }
        return LabelChange::Invalid(errors_new);
    };
    let (policy_old, errors_old) = policy(old);
    if !errors_new.is_empty() && (errors_old.is_empty() || errors_new != errors_old) {
        return LabelChange::Invalid(errors_new);
    }
    let (now, before) = (policy_new.enforce, policy_old.enforce);
    let unchanged = now == before
        || now.level == Level::Privileged
        || (now.version == before.version && now.level <= before.level);
    LabelChange::Admitted((!unchanged).then_some(now))
}

/// The warnings kube-apiserver gives when `namespace`'s `enforce` level becomes `enforce`:
/// whether its pods violate it, then each distinct set of violations once, naming the first
/// pod (by name) and how many others share it. Pods of one controller are judged once before
/// any of its others; at most 3000 pods are judged.
pub fn existing_pod_warnings(
    namespace: &str,
    enforce: LevelVersion,
    pods: &[Value],
) -> Vec<String> {
    let mut first_of_controller: Vec<&Value> = Vec::new();
    let mut later: Vec<&Value> = Vec::new();
    let mut controllers: HashSet<&str> = HashSet::new();
    for pod in pods {
        match controller_uid(pod) {
            Some(uid) if !controllers.insert(uid) => later.push(pod),
            _ => first_of_controller.push(pod),
        }
    }
    let total = pods.len();
    let judged: Vec<&Value> = first_of_controller
        .into_iter()
        .chain(later)
        .take(MAX_PODS_TO_CHECK)
        .collect();
    // Each distinct reason list: its first pod by name, and how many pods share it.
    let mut order: Vec<String> = Vec::new();
    let mut counts: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let empty = json!({});
    for pod in &judged {
        let violations = evaluate(
            enforce,
            pod.get("metadata").unwrap_or(&empty),
            pod.get("spec").unwrap_or(&empty),
        );
        if violations.is_empty() {
            continue;
        }
        let reasons: Vec<&str> = violations.iter().map(|v| v.reason.as_str()).collect();
        let reasons = reasons.join(", ");
        let name = pod
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match counts.get_mut(&reasons) {
            Some((first, count)) => {
                if name < *first {
                    *first = name;
                }
                *count += 1;
            }
            None => {
                order.push(reasons.clone());
                counts.insert(reasons, (name, 1));
            }
        }
    }
    let mut warnings = Vec::new();
    if judged.len() < total {
        warnings.push(format!(
            "new PodSecurity enforce level only checked against the first {} of {total} existing pods",
            judged.len()
        ));
    }
    if !order.is_empty() {
        warnings.push(format!(
            "existing pods in namespace \"{namespace}\" violate the new PodSecurity enforce level \"{enforce}\""
        ));
    }
    let mut per_reasons: Vec<String> = order
        .iter()
        .map(|reasons| {
            let (first, count) = &counts[reasons];
            match count {
                1 => format!("{first}: {reasons}"),
                2 => format!("{first} (and 1 other pod): {reasons}"),
                n => format!("{first} (and {} other pods): {reasons}", n - 1),
            }
        })
        .collect();
    per_reasons.sort();
    warnings.extend(per_reasons);
    warnings
}

fn controller_uid(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|r| r.get("uid").and_then(Value::as_str))
}

/// The labels of an object, for [`policy`].
pub fn labels(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/labels")
}

/// A pod template's metadata and spec, read where a workload keeps it.
pub fn template_parts(template: &Value) -> (&Value, &Value) {
    static EMPTY: std::sync::LazyLock<Value> =
        std::sync::LazyLock::new(|| Value::Object(Map::new()));
    (
        template.get("metadata").unwrap_or(&EMPTY),
        template.get("spec").unwrap_or(&EMPTY),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Value {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (format!("{LABEL_PREFIX}{k}"), json!(v)))
                .collect(),
        )
    }

    fn restricted() -> LevelVersion {
        LevelVersion {
            level: Level::Restricted,
            version: Version::Latest,
        }
    }

    fn bare_pod(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    }

    #[test]
    fn labels_set_each_mode_and_warn_follows_a_stricter_enforce() {
        let (p, errors) = policy(Some(&labels(&[
            ("enforce", "baseline"),
            ("enforce-version", "v1.24"),
        ])));
        assert!(errors.is_empty());
        assert_eq!(p.enforce.to_string(), "baseline:v1.24");
        assert_eq!(p.warn.to_string(), "baseline:v1.24");
        assert_eq!(p.audit.to_string(), "privileged:latest");
        let (p, _) = policy(Some(&labels(&[
            ("enforce", "baseline"),
            ("warn", "privileged"),
        ])));
        assert_eq!(
            p.warn.level,
            Level::Privileged,
            "an explicit warn level stands"
        );
        assert_eq!(policy(None).0, Policy::default());
    }

    #[test]
    fn labels_naming_no_level_or_version_are_field_errors() {
        let (p, errors) = policy(Some(&labels(&[
            ("enforce", "strict"),
            ("warn", "loud"),
            ("audit-version", "1.24"),
        ])));
        let messages: Vec<&str> = errors.iter().map(|e| e.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted",
                "metadata.labels[pod-security.kubernetes.io/audit-version]: Invalid value: \"1.24\": must be \"latest\" or \"v1.x\"",
                "metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: \"loud\": must be one of privileged, baseline, restricted",
            ]
        );
        assert_eq!(p.enforce.level, Level::Restricted, "enforce fails closed");
        assert_eq!(p.warn.level, Level::Privileged, "warn fails open");
        assert!(Version::parse("v1.07").is_none() && Version::parse("v1.").is_none());
        assert_eq!(Version::parse("v1.0"), Some(Version::Minor(0)));
    }

    #[test]
    fn a_pod_violating_enforce_is_refused_and_one_violating_warn_warned() {
        let pod = bare_pod("p");
        let (enforcing, _) = policy(Some(&labels(&[("enforce", "restricted")])));
        let verdict = judge(&enforcing, &pod["metadata"], &pod["spec"], true);
        let Verdict::Refused(reason) = verdict else {
            panic!("{verdict:?}")
        };
        assert!(
            reason.starts_with("violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"c\" must set"),
            "{reason}"
        );
        assert_eq!(
            judge(&enforcing, &pod["metadata"], &pod["spec"], false),
            Verdict::Admitted(vec![reason.replacen("violates", "would violate", 1)]),
            "a template is only warned about"
        );
        let (warning, _) = policy(Some(&labels(&[("warn", "baseline")])));
        let mut host = pod.clone();
        host["spec"]["hostPID"] = json!(true);
        assert_eq!(
            judge(&warning, &host["metadata"], &host["spec"], true),
            Verdict::Admitted(vec![
                "would violate PodSecurity \"baseline:latest\": host namespaces (hostPID=true)"
                    .into()
            ])
        );
        assert_eq!(
            judge(&Policy::default(), &host["metadata"], &host["spec"], true),
            Verdict::Admitted(Vec::new())
        );
    }

    #[test]
    fn only_a_stricter_or_re_versioned_enforce_checks_existing_pods() {
        let none = json!({});
        let restricted_labels = labels(&[("enforce", "restricted")]);
        let baseline_labels = labels(&[("enforce", "baseline")]);
        assert_eq!(
            label_change(Some(&restricted_labels), Some(Some(&none))),
            LabelChange::Admitted(Some(restricted()))
        );
        assert_eq!(
            label_change(Some(&baseline_labels), Some(Some(&restricted_labels))),
            LabelChange::Admitted(None),
            "relaxed"
        );
        assert_eq!(
            label_change(Some(&restricted_labels), Some(Some(&restricted_labels))),
            LabelChange::Admitted(None)
        );
        let bad = labels(&[("enforce", "strict")]);
        assert!(matches!(
            label_change(Some(&bad), Some(Some(&none))),
            LabelChange::Invalid(_)
        ));
        assert!(matches!(
            label_change(Some(&bad), None),
            LabelChange::Invalid(_)
        ));
        let other = labels(&[("enforce", "strict"), ("team", "a")]);
        assert_eq!(
            label_change(Some(&other), Some(Some(&bad))),
            LabelChange::Admitted(None),
            "labels already wrong do not block other changes"
        );
    }

    #[test]
    fn existing_pods_are_summarised_by_what_they_violate() {
        let mut hardened = bare_pod("fine");
        hardened["spec"]["containers"][0]["securityContext"] = json!({
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}});
        let mut loose = hardened.clone();
        loose["metadata"]["name"] = json!("loose");
        loose["spec"]["containers"][0]["securityContext"]
            .as_object_mut()
            .unwrap()
            .remove("seccompProfile");
        let pods = vec![
            bare_pod("zed"),
            hardened,
            loose,
            bare_pod("b"),
            bare_pod("c"),
        ];
        assert_eq!(
            existing_pod_warnings("ns", restricted(), &pods),
            [
                "existing pods in namespace \"ns\" violate the new PodSecurity enforce level \"restricted:latest\"",
                "b (and 2 other pods): allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile",
                "loose: seccompProfile",
            ]
        );
        assert!(existing_pod_warnings("ns", PRIVILEGED, &pods).is_empty());
    }

    #[test]
    fn only_image_and_container_changes_are_judged_again() {
        let old = bare_pod("p");
        let mut labelled = old.clone();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        assert!(!significant_pod_update(&old, &labelled));
        let mut image = old.clone();
        image["spec"]["containers"][0]["image"] = json!("j");
        assert!(significant_pod_update(&old, &image));
        let mut debug = old.clone();
        debug["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox"}]);
        assert!(significant_pod_update(&old, &debug));
    }
}

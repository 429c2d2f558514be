//! The checks of the Pod Security Standards, as kube-apiserver v1.36's PodSecurity admission
//! runs them: each has a level, and a rule for each Kubernetes version from which it changed;
//! `restricted` runs its own checks and the `baseline` ones it does not replace. Each finding
//! is worded as kube-apiserver words it (clients and people match on it).
//!
//! Pure: a pod's metadata and spec (JSON, as served) in, what they violate out.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Level;

/// The newest version whose rules are known: a level at a later version, or at `latest`, is
/// judged by these.
pub const NEWEST_MINOR: u32 = 36;

/// One thing a pod does that its level forbids: a short reason (what namespace label warnings
/// list) and the detail of who does it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub reason: String,
    pub detail: String,
}

type Rule = fn(&PodView<'_>) -> Option<Violation>;

/// A rule from one version on, and the baseline checks it replaces at `restricted`.
struct Since {
    minor: u32,
    rule: Rule,
    replaces: &'static [&'static str],
}

struct Check {
    id: &'static str,
    level: Level,
    since: &'static [Since],
}

const fn since(minor: u32, rule: Rule) -> Since {
    Since {
        minor,
        rule,
        replaces: &[],
    }
}

const fn replacing(minor: u32, rule: Rule, replaces: &'static [&'static str]) -> Since {
    Since {
        minor,
        rule,
        replaces,
    }
}

/// Every check, baseline ones first, each level's in the order of their ids (as Go sorts
/// them, capitals first): findings are listed in this order.
const CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        since: &[since(0, app_armor)],
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        since: &[since(0, capabilities_baseline)],
    },
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        since: &[since(0, host_namespaces)],
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        since: &[since(0, host_path_volumes)],
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        since: &[since(0, host_ports)],
    },
    Check {
        id: "hostProbesAndHostLifecycle",
        level: Level::Baseline,
        since: &[since(34, probe_hosts)],
    },
    Check {
        id: "privileged",
        level: Level::Baseline,
        since: &[since(0, privileged)],
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        since: &[
            since(0, proc_mount),
            since(35, proc_mount_outside_user_namespace),
        ],
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        since: &[since(0, se_linux_1_0), since(31, se_linux_1_31)],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        since: &[since(0, seccomp_annotations), since(19, seccomp_baseline)],
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        since: &[
            since(0, sysctls_1_0),
            since(27, sysctls_1_27),
            since(29, sysctls_1_29),
            since(32, sysctls_1_32),
        ],
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        since: &[since(0, windows_host_process)],
    },
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        since: &[
            since(8, privilege_escalation),
            since(25, privilege_escalation_unless_windows),
        ],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        since: &[
            replacing(22, capabilities_restricted, &["capabilities_baseline"]),
            replacing(
                25,
                capabilities_restricted_unless_windows,
                &["capabilities_baseline"],
            ),
        ],
    },
    Check {
        id: "procMount_restricted",
        level: Level::Restricted,
        since: &[replacing(35, proc_mount, &["procMount"])],
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        since: &[replacing(0, restricted_volumes, &["hostPathVolumes"])],
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        since: &[
            since(0, run_as_non_root),
            since(35, run_as_non_root_outside_user_namespace),
        ],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        since: &[
            since(23, run_as_user),
            since(35, run_as_user_outside_user_namespace),
        ],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        since: &[
            replacing(19, seccomp_restricted, &["seccompProfile_baseline"]),
            replacing(
                25,
                seccomp_restricted_unless_windows,
                &["seccompProfile_baseline"],
            ),
        ],
    },
];

/// What `pod` (its metadata and spec) violates of `level` at version 1.`minor` (at most
/// [`NEWEST_MINOR`]), in kube-apiserver's order.
pub fn violations(level: Level, minor: u32, metadata: &Value, spec: &Value) -> Vec<Violation> {
    let minor = minor.min(NEWEST_MINOR);
    let at = |check: &Check| check.since.iter().rev().find(|s| s.minor <= minor);
    let replaced: Vec<&str> = match level {
        Level::Restricted => CHECKS
            .iter()
            .filter(|c| c.level == Level::Restricted)
            .filter_map(at)
            .flat_map(|s| s.replaces.iter().copied())
            .collect(),
        _ => Vec::new(),
    };
    let applies = |check: &Check| match level {
        Level::Privileged => false,
        Level::Baseline => check.level == Level::Baseline,
        Level::Restricted => !replaced.contains(&check.id),
    };
    let pod = PodView { metadata, spec };
    CHECKS
        .iter()
        .filter(|c| applies(c))
        .filter_map(at)
        .filter_map(|s| (s.rule)(&pod))
        .collect()
}

/// A pod's metadata and spec, read as the checks need them.
struct PodView<'a> {
    metadata: &'a Value,
    spec: &'a Value,
}

impl<'a> PodView<'a> {
    /// Init containers, containers, then ephemeral containers, as kube visits them.
    fn containers(&self) -> impl Iterator<Item = Container<'a>> {
        let spec = self.spec;
        ["initContainers", "containers", "ephemeralContainers"]
            .into_iter()
            .filter_map(move |l| spec.get(l).and_then(Value::as_array))
            .flatten()
            .map(|c| Container {
                name: c.get("name").and_then(Value::as_str).unwrap_or(""),
                value: c,
            })
    }

    /// A field of the pod's security context.
    fn pod_security(&self, path: &str) -> Option<&'a Value> {
        self.spec
            .get("securityContext")
            .and_then(|s| s.pointer(path))
            .filter(|v| !v.is_null())
    }

    fn volumes(&self) -> impl Iterator<Item = &'a Value> {
        self.spec
            .get("volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
    }

    fn annotations(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.metadata
            .get("annotations")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
    }

    fn annotation(&self, key: &str) -> Option<&'a str> {
        self.metadata
            .get("annotations")
            .and_then(|a| a.get(key))
            .map(|v| v.as_str().unwrap_or(""))
    }

    fn is_windows(&self) -> bool {
        self.spec.pointer("/os/name").and_then(Value::as_str) == Some("windows")
    }

    /// `hostUsers: false`: the pod runs in a user namespace of its own.
    fn in_user_namespace(&self) -> bool {
        self.spec.get("hostUsers").and_then(Value::as_bool) == Some(false)
    }

    fn flag(&self, field: &str) -> bool {
        self.spec.get(field).and_then(Value::as_bool) == Some(true)
    }
}

struct Container<'a> {
    name: &'a str,
    value: &'a Value,
}

impl<'a> Container<'a> {
    fn security(&self, path: &str) -> Option<&'a Value> {
        self.value
            .get("securityContext")
            .and_then(|s| s.pointer(path))
            .filter(|v| !v.is_null())
    }

    fn has_security(&self, path: &str) -> bool {
        self.security(path).is_some()
    }
}

fn violation(reason: impl Into<String>, detail: impl Into<String>) -> Option<Violation> {
    Some(Violation {
        reason: reason.into(),
        detail: detail.into(),
    })
}

fn pluralize<'s>(singular: &'s str, plural: &'s str, count: usize) -> &'s str {
    if count == 1 { singular } else { plural }
}

/// `"a", "b"`
fn join_quoted<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|i| format!("\"{}\"", i.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `container "a"` or `containers "a", "b"`
fn containers_phrase<S: AsRef<str>>(names: &[S]) -> String {
    format!(
        "{} {}",
        pluralize("container", "containers", names.len()),
        join_quoted(names)
    )
}

/// Go's `%q` of a string.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn str_of(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or("")
}

fn app_armor(pod: &PodView<'_>) -> Option<Violation> {
    let allowed = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    let mut setters: Vec<String> = Vec::new();
    let mut values: BTreeSet<String> = BTreeSet::new();
    if let Some(profile) = pod.pod_security("/appArmorProfile") {
        let t = str_of(profile.get("type"));
        if !allowed(t) {
            setters.push("pod".into());
            values.insert(t.to_string());
        }
    }
    let mut bad: Vec<&str> = Vec::new();
    for c in pod.containers() {
        if let Some(profile) = c.security("/appArmorProfile") {
            let t = str_of(profile.get("type"));
            if !allowed(t) {
                bad.push(c.name);
                values.insert(t.to_string());
            }
        }
    }
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    let mut values: Vec<String> = values.into_iter().collect();
    let mut annotations: Vec<String> = pod
        .annotations()
        .filter(|(k, v)| {
            k.starts_with("container.apparmor.security.beta.kubernetes.io/")
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect();
    if !annotations.is_empty() {
        annotations.sort();
        setters.push(pluralize("annotation", "annotations", annotations.len()).into());
        values.extend(annotations);
    }
    if setters.is_empty() {
        return None;
    }
    violation(
        pluralize(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            setters.join(" and "),
            join_quoted(&values)
        ),
    )
}

/// The capabilities a container may add at `baseline`: the container runtime's defaults.
const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn strings(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| s.as_str().unwrap_or(""))
        .collect()
}

fn capabilities_baseline(pod: &PodView<'_>) -> Option<Violation> {
    let mut bad: Vec<&str> = Vec::new();
    let mut added: BTreeSet<&str> = BTreeSet::new();
    for c in pod.containers() {
        let extra: Vec<&str> = strings(c.security("/capabilities/add"))
            .into_iter()
            .filter(|cap| !DEFAULT_CAPABILITIES.contains(cap))
            .collect();
        if !extra.is_empty() {
            bad.push(c.name);
            added.extend(extra);
        }
    }
    if bad.is_empty() {
        return None;
    }
    let added: Vec<&str> = added.into_iter().collect();
    violation(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&bad),
            join_quoted(&added)
        ),
    )
}

fn host_namespaces(pod: &PodView<'_>) -> Option<Violation> {
    let shared: Vec<&str> = [
        ("hostNetwork", "hostNetwork=true"),
        ("hostPID", "hostPID=true"),
        ("hostIPC", "hostIPC=true"),
    ]
    .into_iter()
    .filter(|(field, _)| pod.flag(field))
    .map(|(_, said)| said)
    .collect();
    if shared.is_empty() {
        return None;
    }
    violation("host namespaces", shared.join(", "))
}

fn host_path_volumes(pod: &PodView<'_>) -> Option<Violation> {
    let names: Vec<&str> = pod
        .volumes()
        .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(|v| str_of(v.get("name")))
        .collect();
    if names.is_empty() {
        return None;
    }
    violation(
        "hostPath volumes",
        format!(
            "{} {}",
            pluralize("volume", "volumes", names.len()),
            join_quoted(&names)
        ),
    )
}

fn host_ports(pod: &PodView<'_>) -> Option<Violation> {
    let mut bad: Vec<&str> = Vec::new();
    let mut ports: BTreeSet<String> = BTreeSet::new();
    for c in pod.containers() {
        let used: Vec<i64> = c
            .value
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| p.get("hostPort").and_then(Value::as_i64))
            .filter(|p| *p != 0)
            .collect();
        if !used.is_empty() {
            bad.push(c.name);
            ports.extend(used.iter().map(i64::to_string));
        }
    }
    if bad.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    violation(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    )
}

fn probe_hosts(pod: &PodView<'_>) -> Option<Violation> {
    let mut bad: BTreeSet<&str> = BTreeSet::new();
    let mut hosts: BTreeSet<&str> = BTreeSet::new();
    for c in pod.containers() {
        let handlers = ["livenessProbe", "readinessProbe", "startupProbe"]
            .iter()
            .filter_map(|p| c.value.get(*p))
            .chain(
                ["postStart", "preStop"]
                    .iter()
                    .filter_map(|h| c.value.get("lifecycle").and_then(|l| l.get(*h))),
            );
        for handler in handlers {
            for action in ["httpGet", "tcpSocket"] {
                let host = str_of(handler.get(action).and_then(|a| a.get("host")));
                if !host.is_empty() {
                    bad.insert(c.name);
                    hosts.insert(host);
                }
            }
        }
    }
    if bad.is_empty() {
        return None;
    }
    let bad: Vec<&str> = bad.into_iter().collect();
    let hosts: Vec<&str> = hosts.into_iter().collect();
    violation(
        "probe or lifecycle host",
        format!(
            "{} {} {} {}",
            containers_phrase(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize(
                "probe or lifecycle host",
                "probe or lifecycle hosts",
                hosts.len()
            ),
            join_quoted(&hosts)
        ),
    )
}

fn privileged(pod: &PodView<'_>) -> Option<Violation> {
    let bad: Vec<&str> = pod
        .containers()
        .filter(|c| c.security("/privileged").and_then(Value::as_bool) == Some(true))
        .map(|c| c.name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    violation(
        "privileged",
        format!(
            "{} must not set securityContext.privileged=true",
            containers_phrase(&bad)
        ),
    )
}

fn proc_mount(pod: &PodView<'_>) -> Option<Violation> {
    let mut bad: Vec<&str> = Vec::new();
    let mut types: BTreeSet<&str> = BTreeSet::new();
    for c in pod.containers() {
        if let Some(mount) = c.security("/procMount") {
            let mount = mount.as_str().unwrap_or("");
            if mount != "Default" {
                bad.push(c.name);
                types.insert(mount);
            }
        }
    }
    if bad.is_empty() {
        return None;
    }
    let types: Vec<&str> = types.into_iter().collect();
    violation(
        "procMount",
        format!(
            "{} must not set securityContext.procMount to {}",
            containers_phrase(&bad),
            join_quoted(&types)
        ),
    )
}

fn proc_mount_outside_user_namespace(pod: &PodView<'_>) -> Option<Violation> {
    if pod.in_user_namespace() {
        return None;
    }
    proc_mount(pod)
}

fn se_linux_1_0(pod: &PodView<'_>) -> Option<Violation> {
    se_linux(
        pod,
        &["", "container_t", "container_init_t", "container_kvm_t"],
    )
}

fn se_linux_1_31(pod: &PodView<'_>) -> Option<Violation> {
    se_linux(
        pod,
        &[
            "",
            "container_t",
            "container_init_t",
            "container_kvm_t",
            "container_engine_t",
        ],
    )
}

fn se_linux(pod: &PodView<'_>, allowed: &[&str]) -> Option<Violation> {
    let mut types: BTreeSet<String> = BTreeSet::new();
    let (mut user, mut role) = (false, false);
    let mut valid = |options: &Value| {
        let mut ok = true;
        let t = str_of(options.get("type"));
        if !allowed.contains(&t) {
            ok = false;
            types.insert(t.to_string());
        }
        if !str_of(options.get("user")).is_empty() {
            ok = false;
            user = true;
        }
        if !str_of(options.get("role")).is_empty() {
            ok = false;
            role = true;
        }
        ok
    };
    let mut setters: Vec<String> = Vec::new();
    if let Some(options) = pod.pod_security("/seLinuxOptions")
        && !valid(options)
    {
        setters.push("pod".into());
    }
    let bad: Vec<&str> = pod
        .containers()
        .filter(|c| c.security("/seLinuxOptions").is_some_and(|o| !valid(o)))
        .map(|c| c.name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    let mut what: Vec<String> = Vec::new();
    if !types.is_empty() {
        let types: Vec<String> = types.into_iter().collect();
        what.push(format!(
            "{} {}",
            pluralize("type", "types", types.len()),
            join_quoted(&types)
        ));
    }
    if user {
        what.push("user may not be set".into());
    }
    if role {
        what.push("role may not be set".into());
    }
    violation(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            setters.join(" and "),
            what.join("; ")
        ),
    )
}

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// Before 1.19, seccomp profiles were set by annotations.
fn seccomp_annotations(pod: &PodView<'_>) -> Option<Violation> {
    let valid =
        |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let mut forbidden: BTreeSet<String> = BTreeSet::new();
    if let Some(v) = pod.annotation(SECCOMP_POD_ANNOTATION)
        && !valid(v)
    {
        forbidden.insert(format!("{SECCOMP_POD_ANNOTATION}={}", go_quote(v)));
    }
    for c in pod.containers() {
        let key = format!("{SECCOMP_CONTAINER_ANNOTATION}{}", c.name);
        if let Some(v) = pod.annotation(&key)
            && !valid(v)
        {
            forbidden.insert(format!("{key}={}", go_quote(v)));
        }
    }
    if forbidden.is_empty() {
        return None;
    }
    let forbidden: Vec<String> = forbidden.into_iter().collect();
    violation(
        "seccompProfile",
        format!(
            "forbidden {} {}",
            pluralize("annotation", "annotations", forbidden.len()),
            forbidden.join(", ")
        ),
    )
}

fn valid_seccomp(t: &str) -> bool {
    matches!(t, "RuntimeDefault" | "Localhost")
}

/// Who sets a seccomp profile other than the runtime's default or a local one: `pod`, the
/// containers, and the types they set.
struct SeccompSetters<'a> {
    setters: Vec<String>,
    types: BTreeSet<String>,
    /// Containers that set no profile of their own.
    unset: Vec<&'a str>,
    /// Whether the pod sets a valid profile for every container.
    pod_valid: bool,
}

fn seccomp_setters<'a>(pod: &PodView<'a>) -> SeccompSetters<'a> {
    let mut out = SeccompSetters {
        setters: Vec::new(),
        types: BTreeSet::new(),
        unset: Vec::new(),
        pod_valid: false,
    };
    if let Some(profile) = pod.pod_security("/seccompProfile") {
        let t = str_of(profile.get("type"));
        if valid_seccomp(t) {
            out.pod_valid = true;
        } else {
            out.setters.push("pod".into());
            out.types.insert(t.to_string());
        }
    }
    let mut bad: Vec<&str> = Vec::new();
    for c in pod.containers() {
        match c.security("/seccompProfile") {
            Some(profile) => {
                let t = str_of(profile.get("type"));
                if !valid_seccomp(t) {
                    bad.push(c.name);
                    out.types.insert(t.to_string());
                }
            }
            None => out.unset.push(c.name),
        }
    }
    if !bad.is_empty() {
        out.setters.push(containers_phrase(&bad));
    }
    out
}

fn seccomp_forbidden_types(s: &SeccompSetters<'_>) -> Option<Violation> {
    if s.setters.is_empty() {
        return None;
    }
    let types: Vec<&String> = s.types.iter().collect();
    violation(
        "seccompProfile",
        format!(
            "{} must not set securityContext.seccompProfile.type to {}",
            s.setters.join(" and "),
            join_quoted(&types.iter().map(|t| t.as_str()).collect::<Vec<_>>())
        ),
    )
}

fn seccomp_baseline(pod: &PodView<'_>) -> Option<Violation> {
    seccomp_forbidden_types(&seccomp_setters(pod))
}

fn seccomp_restricted(pod: &PodView<'_>) -> Option<Violation> {
    let s = seccomp_setters(pod);
    if let Some(v) = seccomp_forbidden_types(&s) {
        return Some(v);
    }
    if s.pod_valid || s.unset.is_empty() {
        return None;
    }
    violation(
        "seccompProfile",
        format!(
            "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
            containers_phrase(&s.unset)
        ),
    )
}

fn seccomp_restricted_unless_windows(pod: &PodView<'_>) -> Option<Violation> {
    if pod.is_windows() {
        return None;
    }
    seccomp_restricted(pod)
}

const SAFE_SYSCTLS_1_0: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const SAFE_SYSCTLS_1_27: &[&str] = &["net.ipv4.ip_local_reserved_ports"];
const SAFE_SYSCTLS_1_29: &[&str] = &[
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const SAFE_SYSCTLS_1_32: &[&str] = &["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

fn sysctls_1_0(pod: &PodView<'_>) -> Option<Violation> {
    sysctls(pod, &[SAFE_SYSCTLS_1_0])
}

fn sysctls_1_27(pod: &PodView<'_>) -> Option<Violation> {
    sysctls(pod, &[SAFE_SYSCTLS_1_0, SAFE_SYSCTLS_1_27])
}

fn sysctls_1_29(pod: &PodView<'_>) -> Option<Violation> {
    sysctls(
        pod,
        &[SAFE_SYSCTLS_1_0, SAFE_SYSCTLS_1_27, SAFE_SYSCTLS_1_29],
    )
}

fn sysctls_1_32(pod: &PodView<'_>) -> Option<Violation> {
    sysctls(
        pod,
        &[
            SAFE_SYSCTLS_1_0,
            SAFE_SYSCTLS_1_27,
            SAFE_SYSCTLS_1_29,
            SAFE_SYSCTLS_1_32,
        ],
    )
}

fn sysctls(pod: &PodView<'_>, safe: &[&[&str]]) -> Option<Violation> {
    let forbidden: Vec<&str> = pod
        .pod_security("/sysctls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|s| str_of(s.get("name")))
        .filter(|name| !safe.iter().any(|set| set.contains(name)))
        .collect();
    if forbidden.is_empty() {
        return None;
    }
    violation("forbidden sysctls", forbidden.join(", "))
}

fn windows_host_process(pod: &PodView<'_>) -> Option<Violation> {
    let host_process = |v: Option<&Value>| v.and_then(Value::as_bool) == Some(true);
    let mut setters: Vec<String> = Vec::new();
    if host_process(pod.pod_security("/windowsOptions/hostProcess")) {
        setters.push("pod".into());
    }
    let bad: Vec<&str> = pod
        .containers()
        .filter(|c| host_process(c.security("/windowsOptions/hostProcess")))
        .map(|c| c.name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    violation(
        "hostProcess",
        format!(
            "{} must not set securityContext.windowsOptions.hostProcess=true",
            setters.join(" and ")
        ),
    )
}

fn privilege_escalation(pod: &PodView<'_>) -> Option<Violation> {
    let bad: Vec<&str> = pod
        .containers()
        .filter(|c| {
            c.security("/allowPrivilegeEscalation")
                .and_then(Value::as_bool)
                != Some(false)
        })
        .map(|c| c.name)
        .collect();
    if bad.is_empty() {
        return None;
    }
    violation(
        "allowPrivilegeEscalation != false",
        format!(
            "{} must set securityContext.allowPrivilegeEscalation=false",
            containers_phrase(&bad)
        ),
    )
}

fn privilege_escalation_unless_windows(pod: &PodView<'_>) -> Option<Violation> {
    if pod.is_windows() {
        return None;
    }
    privilege_escalation(pod)
}

fn capabilities_restricted(pod: &PodView<'_>) -> Option<Violation> {
    let mut missing_drop: Vec<&str> = Vec::new();
    let mut adding: Vec<&str> = Vec::new();
    let mut added: BTreeSet<&str> = BTreeSet::new();
    for c in pod.containers() {
        if !c.has_security("/capabilities") {
            missing_drop.push(c.name);
            continue;
        }
        if !strings(c.security("/capabilities/drop")).contains(&"ALL") {
            missing_drop.push(c.name);
        }
        let extra: Vec<&str> = strings(c.security("/capabilities/add"))
            .into_iter()
            .filter(|cap| *cap != "NET_BIND_SERVICE")
            .collect();
        if !extra.is_empty() {
            adding.push(c.name);
            added.extend(extra);
        }
    }
    let mut details: Vec<String> = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_phrase(&missing_drop)
        ));
    }
    if !adding.is_empty() {
        let added: Vec<&str> = added.into_iter().collect();
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_phrase(&adding),
            join_quoted(&added)
        ));
    }
    if details.is_empty() {
        return None;
    }
    violation("unrestricted capabilities", details.join("; "))
}

fn capabilities_restricted_unless_windows(pod: &PodView<'_>) -> Option<Violation> {
    if pod.is_windows() {
        return None;
    }
    capabilities_restricted(pod)
}

/// The volume sources `restricted` allows.
const ALLOWED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The volume sources `restricted` forbids, in the order kube-apiserver names the first a
/// volume uses.
const RESTRICTED_VOLUMES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn restricted_volumes(pod: &PodView<'_>) -> Option<Violation> {
    let set = |v: &Value, source: &str| v.get(source).is_some_and(|s| !s.is_null());
    let mut bad: Vec<&str> = Vec::new();
    let mut types: BTreeSet<&str> = BTreeSet::new();
    for v in pod.volumes() {
        if ALLOWED_VOLUMES.iter().any(|s| set(v, s)) {
            continue;
        }
        bad.push(str_of(v.get("name")));
        types.insert(
            RESTRICTED_VOLUMES
                .iter()
                .find(|s| set(v, s))
                .copied()
                .unwrap_or("unknown"),
        );
    }
    if bad.is_empty() {
        return None;
    }
    let types: Vec<&str> = types.into_iter().collect();
    violation(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quoted(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quoted(&types)
        ),
    )
}

fn run_as_non_root(pod: &PodView<'_>) -> Option<Violation> {
    let mut setters: Vec<String> = Vec::new();
    let mut pod_non_root = false;
    match pod.pod_security("/runAsNonRoot").and_then(Value::as_bool) {
        Some(false) => setters.push("pod".into()),
        Some(true) => pod_non_root = true,
        None => {}
    }
    let mut explicit: Vec<&str> = Vec::new();
    let mut implicit: Vec<&str> = Vec::new();
    for c in pod.containers() {
        match c.security("/runAsNonRoot").and_then(Value::as_bool) {
            Some(false) => explicit.push(c.name),
            Some(true) => {}
            None if !pod_non_root => implicit.push(c.name),
            None => {}
        }
    }
    if !explicit.is_empty() {
        setters.push(containers_phrase(&explicit));
    }
    if !setters.is_empty() {
        return violation(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                setters.join(" and ")
            ),
        );
    }
    if implicit.is_empty() {
        return None;
    }
    violation(
        "runAsNonRoot != true",
        format!(
            "pod or {} must set securityContext.runAsNonRoot=true",
            containers_phrase(&implicit)
        ),
    )
}

fn run_as_non_root_outside_user_namespace(pod: &PodView<'_>) -> Option<Violation> {
    if pod.in_user_namespace() {
        return None;
    }
    run_as_non_root(pod)
}

fn run_as_user(pod: &PodView<'_>) -> Option<Violation> {
    let root = |v: Option<&Value>| v.and_then(Value::as_i64) == Some(0);
    let mut setters: Vec<String> = Vec::new();
    if root(pod.pod_security("/runAsUser")) {
        setters.push("pod".into());
    }
    let bad: Vec<&str> = pod
        .containers()
        .filter(|c| root(c.security("/runAsUser")))
        .map(|c| c.name)
        .collect();
    if !bad.is_empty() {
        setters.push(containers_phrase(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    violation(
        "runAsUser=0",
        format!("{} must not set runAsUser=0", setters.join(" and ")),
    )
}

fn run_as_user_outside_user_namespace(pod: &PodView<'_>) -> Option<Violation> {
    if pod.in_user_namespace() {
        return None;
    }
    run_as_user(pod)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A container that meets `restricted`.
    fn hardened(name: &str) -> Value {
        json!({"name": name, "image": "i", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}}})
    }

    fn spec_with(containers: Vec<Value>, extra: Value) -> Value {
        let mut spec = json!({"containers": containers});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        spec
    }

    fn findings(level: Level, minor: u32, spec: &Value) -> Vec<String> {
        violations(level, minor, &json!({}), spec)
            .into_iter()
            .map(|v| format!("{} ({})", v.reason, v.detail))
            .collect()
    }

    fn restricted(spec: &Value) -> Vec<String> {
        findings(Level::Restricted, NEWEST_MINOR, spec)
    }

    fn baseline(spec: &Value) -> Vec<String> {
        findings(Level::Baseline, NEWEST_MINOR, spec)
    }

    #[test]
    fn a_hardened_pod_meets_restricted() {
        let spec = spec_with(vec![hardened("c")], json!({}));
        assert!(restricted(&spec).is_empty(), "{:?}", restricted(&spec));
        assert!(findings(Level::Privileged, 0, &json!({"hostPID": true})).is_empty());
    }

    #[test]
    fn a_bare_container_breaks_four_restricted_rules_in_kube_s_order() {
        let spec = spec_with(vec![json!({"name": "c", "image": "i"})], json!({}));
        assert_eq!(
            restricted(&spec),
            [
                "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false)",
                "unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"])",
                "runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true)",
                "seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")",
            ]
        );
        assert!(baseline(&spec).is_empty(), "a bare pod meets baseline");
    }

    #[test]
    fn pod_level_settings_cover_every_container() {
        let container = json!({"name": "c", "image": "i", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}});
        let spec = spec_with(
            vec![container],
            json!({"securityContext": {"runAsNonRoot": true,
                "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}}),
        );
        assert!(restricted(&spec).is_empty(), "{:?}", restricted(&spec));
    }

    #[test]
    fn explicit_bad_values_name_who_set_them() {
        let mut c = hardened("c");
        c["securityContext"]["runAsNonRoot"] = json!(false);
        c["securityContext"]["seccompProfile"] = json!({"type": "Unconfined"});
        c["securityContext"]["runAsUser"] = json!(0);
        let spec = spec_with(
            vec![c, hardened("d")],
            json!({"securityContext": {"runAsNonRoot": false, "runAsUser": 0}}),
        );
        assert_eq!(
            restricted(&spec),
            [
                "runAsNonRoot != true (pod and container \"c\" must not set securityContext.runAsNonRoot=false)",
                "runAsUser=0 (pod and container \"c\" must not set runAsUser=0)",
                "seccompProfile (container \"c\" must not set securityContext.seccompProfile.type to \"Unconfined\")",
            ]
        );
    }

    #[test]
    fn host_namespaces_ports_and_paths_break_baseline() {
        let mut c = hardened("c");
        c["ports"] =
            json!([{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9, "hostPort": 10}]);
        let spec = spec_with(
            vec![c],
            json!({"hostNetwork": true, "hostIPC": true,
                "volumes": [{"name": "root", "hostPath": {"path": "/"}}]}),
        );
        assert_eq!(
            baseline(&spec),
            [
                "host namespaces (hostNetwork=true, hostIPC=true)",
                "hostPath volumes (volume \"root\")",
                "hostPort (container \"c\" uses hostPorts 10, 8080)",
            ]
        );
        assert_eq!(
            restricted(&spec),
            [
                "host namespaces (hostNetwork=true, hostIPC=true)",
                "hostPort (container \"c\" uses hostPorts 10, 8080)",
                "restricted volume types (volume \"root\" uses restricted volume type \"hostPath\")",
            ],
            "restricted names hostPath among its volume types instead"
        );
    }

    #[test]
    fn privileged_containers_and_capabilities_break_baseline() {
        let spec = spec_with(
            vec![
                json!({"name": "a", "image": "i", "securityContext": {"privileged": true,
                    "capabilities": {"add": ["NET_ADMIN", "CHOWN", "SYS_ADMIN"]}}}),
                json!({"name": "b", "image": "i", "securityContext": {"privileged": true}}),
            ],
            json!({}),
        );
        assert_eq!(
            baseline(&spec),
            [
                "non-default capabilities (container \"a\" must not include \"NET_ADMIN\", \"SYS_ADMIN\" in securityContext.capabilities.add)",
                "privileged (containers \"a\", \"b\" must not set securityContext.privileged=true)",
            ]
        );
        let mut adds = hardened("c");
        adds["securityContext"]["capabilities"]["add"] = json!(["NET_BIND_SERVICE", "CHOWN"]);
        assert_eq!(
            restricted(&spec_with(vec![adds], json!({}))),
            [
                "unrestricted capabilities (container \"c\" must not include \"CHOWN\" in securityContext.capabilities.add)"
            ],
            "restricted allows adding NET_BIND_SERVICE only"
        );
    }

    #[test]
    fn app_armor_se_linux_proc_mount_and_sysctls_break_baseline() {
        let mut c = hardened("c");
        c["securityContext"]["appArmorProfile"] = json!({"type": "Unconfined"});
        c["securityContext"]["seLinuxOptions"] = json!({"type": "spc_t", "user": "root"});
        c["securityContext"]["procMount"] = json!("Unmasked");
        let spec = json!({"containers": [c], "securityContext": {
            "sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"},
                {"name": "net.ipv4.tcp_rmem", "value": "1"},
                {"name": "kernel.msgmax", "value": "1"}]}});
        let meta = json!({"annotations": {
            "container.apparmor.security.beta.kubernetes.io/c": "unconfined"}});
        let found: Vec<String> = violations(Level::Baseline, NEWEST_MINOR, &meta, &spec)
            .into_iter()
            .map(|v| format!("{} ({})", v.reason, v.detail))
            .collect();
        assert_eq!(
            found,
            [
                "forbidden AppArmor profiles (container \"c\" and annotation must not set AppArmor profile type to \"Unconfined\", \"container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"\")",
                "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")",
                "seLinuxOptions (container \"c\" set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set)",
                "forbidden sysctls (kernel.msgmax)",
            ]
        );
        let old = violations(Level::Baseline, 31, &json!({}), &spec);
        assert_eq!(
            old.last().map(|v| v.detail.as_str()),
            Some("net.ipv4.tcp_rmem, kernel.msgmax"),
            "tcp_rmem became safe in 1.32"
        );
    }

    #[test]
    fn probe_and_lifecycle_hosts_break_baseline_from_1_34() {
        let mut c = hardened("c");
        c["livenessProbe"] = json!({"httpGet": {"host": "example.com", "port": 80}});
        c["lifecycle"] = json!({"preStop": {"tcpSocket": {"host": "10.0.0.1", "port": 1}}});
        let spec = spec_with(vec![c], json!({}));
        assert_eq!(
            baseline(&spec),
            [
                "probe or lifecycle host (container \"c\" uses probe or lifecycle hosts \"10.0.0.1\", \"example.com\")"
            ]
        );
        assert!(findings(Level::Baseline, 33, &spec).is_empty());
    }

    #[test]
    fn restricted_volumes_allow_only_ephemeral_sources() {
        let spec = spec_with(
            vec![hardened("c")],
            json!({"volumes": [{"name": "ok", "emptyDir": {}},
                {"name": "cfg", "configMap": {"name": "x"}},
                {"name": "share", "nfs": {"server": "s", "path": "/"}},
                {"name": "git", "gitRepo": {"repository": "r"}}]}),
        );
        assert_eq!(
            restricted(&spec),
            [
                "restricted volume types (volumes \"share\", \"git\" use restricted volume types \"gitRepo\", \"nfs\")"
            ]
        );
    }

    #[test]
    fn older_versions_judge_by_their_own_rules() {
        let bare = spec_with(vec![json!({"name": "c", "image": "i"})], json!({}));
        let reasons = |minor| -> Vec<String> {
            violations(Level::Restricted, minor, &json!({}), &bare)
                .into_iter()
                .map(|v| v.reason)
                .collect()
        };
        assert_eq!(
            reasons(18),
            ["allowPrivilegeEscalation != false", "runAsNonRoot != true"]
        );
        assert_eq!(reasons(7), ["runAsNonRoot != true"]);
        let annotated = json!({"annotations": {SECCOMP_POD_ANNOTATION: "unconfined"}});
        let old = violations(Level::Restricted, 18, &annotated, &bare);
        assert_eq!(
            old[0].detail,
            "forbidden annotation seccomp.security.alpha.kubernetes.io/pod=\"unconfined\"",
            "before 1.19 seccomp was an annotation, checked at restricted by baseline's rule"
        );
    }

    #[test]
    fn windows_pods_and_user_namespaces_are_relaxed_where_kube_relaxes_them() {
        let c = json!({"name": "c", "image": "i", "securityContext": {"runAsNonRoot": true,
            "procMount": "Unmasked", "runAsUser": 0}});
        let windows = spec_with(vec![c.clone()], json!({"os": {"name": "windows"}}));
        assert_eq!(
            findings(Level::Restricted, NEWEST_MINOR, &windows),
            [
                "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")",
                "runAsUser=0 (container \"c\" must not set runAsUser=0)",
            ]
        );
        let user_namespace = spec_with(vec![c], json!({"hostUsers": false}));
        let reasons: Vec<String> =
            violations(Level::Baseline, NEWEST_MINOR, &json!({}), &user_namespace)
                .into_iter()
                .map(|v| v.reason)
                .collect();
        assert!(
            reasons.is_empty(),
            "baseline allows /proc unmasked in a user namespace"
        );
        assert!(
            restricted(&user_namespace)
                .iter()
                .any(|f| f.starts_with("procMount")),
            "restricted does not"
        );
    }

    #[test]
    fn host_process_is_refused_for_pod_and_containers() {
        let spec = spec_with(
            vec![json!({"name": "c", "image": "i",
                "securityContext": {"windowsOptions": {"hostProcess": true}}})],
            json!({"securityContext": {"windowsOptions": {"hostProcess": true}}}),
        );
        assert_eq!(
            baseline(&spec),
            [
                "hostProcess (pod and container \"c\" must not set securityContext.windowsOptions.hostProcess=true)"
            ]
        );
    }
}

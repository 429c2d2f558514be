//! The Pod Security Standards' `restricted` profile (which includes `baseline`) as a pure check
//! of a pod spec, for workloads whose namespace enforces it (`pod-security.kubernetes.io/enforce:
//! restricted`). It says every rule a pod breaks, as the admission's message names the checks.

use serde_json::Value;

/// Volume types `restricted` allows.
const RESTRICTED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// Sysctls `baseline` allows.
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

/// What of `restricted` the pod `spec` (a PodSpec, as JSON) breaks; empty when it passes.
pub fn restricted_violations(spec: &Value) -> Vec<String> {
    let mut broken = Vec::new();
    let pod = &spec["securityContext"];
    let containers: Vec<(String, &Value)> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| spec[*list].as_array().into_iter().flatten())
        .map(|container| {
            let name = container["name"].as_str().unwrap_or("?").to_string();
            (name, container)
        })
        .collect();
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec[field] == true {
            broken.push(format!("host namespaces: {field}=true"));
        }
    }
    for volume in spec["volumes"].as_array().into_iter().flatten() {
        let name = volume["name"].as_str().unwrap_or("?");
        let kinds: Vec<&String> = volume
            .as_object()
            .into_iter()
            .flat_map(|fields| fields.keys())
            .filter(|key| *key != "name")
            .collect();
        for kind in kinds {
            if !RESTRICTED_VOLUMES.contains(&kind.as_str()) {
                broken.push(format!(
                    "restricted volume types: volume {name} uses {kind}"
                ));
            }
        }
    }
    for sysctl in pod["sysctls"].as_array().into_iter().flatten() {
        let name = sysctl["name"].as_str().unwrap_or("?");
        if !SAFE_SYSCTLS.contains(&name) {
            broken.push(format!("forbidden sysctls: {name}"));
        }
    }
    let seccomp_ok = |context: &Value| {
        matches!(
            context["seccompProfile"]["type"].as_str(),
            Some("RuntimeDefault" | "Localhost")
        )
    };
    let pod_seccomp = seccomp_ok(pod);
    if pod["seccompProfile"]["type"] == "Unconfined" {
        broken.push("seccompProfile: pod sets Unconfined".into());
    }
    let pod_non_root = pod["runAsNonRoot"] == true;
    if pod["runAsUser"] == 0 {
        broken.push("runAsUser=0: pod".into());
    }
    check_se_linux(pod, "pod", &mut broken);
    check_app_armor(pod, "pod", &mut broken);
    for (name, container) in &containers {
        let context = &container["securityContext"];
        if context["privileged"] == true {
            broken.push(format!("privileged: container {name}"));
        }
        if context["allowPrivilegeEscalation"] != false {
            broken.push(format!(
                "allowPrivilegeEscalation != false: container {name} must set securityContext.allowPrivilegeEscalation=false"
            ));
        }
        let drops: Vec<&str> = context["capabilities"]["drop"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !drops.contains(&"ALL") {
            broken.push(format!(
                "unrestricted capabilities: container {name} must set securityContext.capabilities.drop=[\"ALL\"]"
            ));
        }
        for added in context["capabilities"]["add"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            // `restricted` lets a container add this one only (of `baseline`'s few).
            if added != "NET_BIND_SERVICE" {
                broken.push(format!(
                    "unrestricted capabilities: container {name} adds {added}"
                ));
            }
        }
        for port in container["ports"].as_array().into_iter().flatten() {
            if port["hostPort"].as_i64().is_some_and(|port| port != 0) {
                broken.push(format!("hostPort: container {name}"));
            }
        }
        if context["runAsNonRoot"] == false || (!pod_non_root && context["runAsNonRoot"] != true) {
            broken.push(format!(
                "runAsNonRoot != true: pod or container {name} must set securityContext.runAsNonRoot=true"
            ));
        }
        if context["runAsUser"] == 0 {
            broken.push(format!("runAsUser=0: container {name}"));
        }
        if context["seccompProfile"]["type"] == "Unconfined"
            || (!pod_seccomp && !seccomp_ok(context))
        {
            broken.push(format!(
                "seccompProfile: pod or container {name} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\""
            ));
        }
        if context["procMount"]
            .as_str()
            .is_some_and(|mount| mount != "Default")
        {
            broken.push(format!("procMount: container {name}"));
        }
        check_se_linux(context, &format!("container {name}"), &mut broken);
        check_app_armor(context, &format!("container {name}"), &mut broken);
    }
    broken
}

fn check_se_linux(context: &Value, what: &str, broken: &mut Vec<String>) {
    let options = &context["seLinuxOptions"];
    let type_ = options["type"].as_str().unwrap_or_default();
    if ![
        "",
        "container_t",
        "container_init_t",
        "container_kvm_t",
        "container_engine_t",
    ]
    .contains(&type_)
        || options["user"].is_string()
        || options["role"].is_string()
    {
        broken.push(format!("seLinuxOptions: {what}"));
    }
}

fn check_app_armor(context: &Value, what: &str, broken: &mut Vec<String>) {
    if let Some(profile) = context["appArmorProfile"]["type"].as_str()
        && !["RuntimeDefault", "Localhost"].contains(&profile)
    {
        broken.push(format!("appArmorProfile: {what} sets {profile}"));
    }
}

//! batch/v1: Jobs and CronJobs, stored with kube-apiserver's defaults. Nothing runs them: a
//! Job's pods are never made and a CronJob never fires.

use serde_json::{Map, Value, json};

use super::{default_pod_template, set_default};
use crate::error::FieldError;
use crate::meta::ObjectMeta;
use crate::resource::{Part, PodAdmission, ResourceInfo, ResourceStrategy, Validation};
use crate::table::{PrinterColumn, doc, human_age, workload};

/// The label a Job's generated selector matches on.
const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";

/// Jobs: one completion at a time unless given, six retries, a selector of their own uid
/// (unless `manualSelector`), pods that never restart, and an empty status on create.
#[derive(Debug)]
pub struct Jobs;

fn job_defaults(obj: &mut Value) {
    if let Some(spec) = obj
        .as_object_mut()
        .and_then(|o| o.entry("spec").or_insert(json!({})).as_object_mut())
    {
        if !spec.contains_key("completions") && !spec.contains_key("parallelism") {
            spec.insert("completions".into(), json!(1));
        }
        set_default(spec, "parallelism", json!(1));
        set_default(spec, "backoffLimit", json!(6));
        set_default(spec, "completionMode", json!("NonIndexed"));
        set_default(spec, "suspend", json!(false));
        let replacement = match spec.get("podFailurePolicy").is_some_and(|p| !p.is_null()) {
            true => "Failed",
            false => "TerminatingOrFailed",
        };
        set_default(spec, "podReplacementPolicy", json!(replacement));
    }
    default_pod_template(obj, "/spec/template");
}

/// What kube-apiserver selects a Job's pods by: its uid, in the selector and the template's
/// labels (with the legacy label names too).
fn generate_selector(obj: &mut Value) {
    if obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    let uid = obj.uid().to_string();
    let name = obj.name().to_string();
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.insert(
        "selector".into(),
        json!({"matchLabels": {CONTROLLER_UID: uid}}),
    );
    let template = spec.entry("template").or_insert(json!({}));
    let Some(template) = template.as_object_mut() else {
        return;
    };
    let meta = template.entry("metadata").or_insert(json!({}));
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let labels = meta.entry("labels").or_insert(json!({}));
    if let Some(labels) = labels.as_object_mut() {
        for (key, value) in [
            (CONTROLLER_UID, &uid),
            ("batch.kubernetes.io/job-name", &name),
            ("controller-uid", &uid),
            ("job-name", &name),
        ] {
            labels.insert(key.into(), json!(value));
        }
    }
}

fn has_condition(obj: &Value, kind: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c.get("type") == Some(&json!(kind)) && c.get("status") == Some(&json!("True")))
}

/// A Job's STATUS column, as `kubectl get jobs` words it.
fn job_status(obj: &Value) -> Value {
    let status = if has_condition(obj, "Complete") {
        "Complete"
    } else if has_condition(obj, "Failed") {
        "Failed"
    } else if obj.is_deleting() {
        "Terminating"
    } else if has_condition(obj, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if has_condition(obj, "Suspended") {
        "Suspended"
    } else if has_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    json!(status)
}

fn job_completions(obj: &Value) -> Value {
    let int = |p: &str| obj.pointer(p).and_then(Value::as_i64);
    let succeeded = int("/status/succeeded").unwrap_or(0);
    json!(match (int("/spec/completions"), int("/spec/parallelism")) {
        (Some(completions), _) => format!("{succeeded}/{completions}"),
        (None, Some(parallelism)) if parallelism > 1 => {
            format!("{succeeded}/1 of {parallelism}")
        }
        _ => format!("{succeeded}/1"),
    })
}

fn job_duration(obj: &Value, now: i64) -> Value {
    let time = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .and_then(crate::meta::parse_time)
    };
    json!(
        match (time("/status/startTime"), time("/status/completionTime")) {
            (None, _) => String::new(),
            (Some(start), Some(end)) => human_age(end - start),
            (Some(start), None) => human_age(now - start),
        }
    )
}

impl ResourceStrategy for Jobs {
    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Template("/spec/template"))
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        vec![
            PrinterColumn::cell("Status", "string", "Status of the job.", |o, _| {
                job_status(o)
            }),
            PrinterColumn::cell(
                "Completions",
                "string",
                doc("batch/v1", "JobStatus", "succeeded"),
                |o, _| job_completions(o),
            ),
            PrinterColumn::cell(
                "Duration",
                "string",
                "Time required to complete the job.",
                job_duration,
            ),
            PrinterColumn::age(),
            workload::containers_column(),
            workload::images_column(),
            workload::selector_column(doc("batch/v1", "JobSpec", "selector")),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        job_defaults(obj);
        generate_selector(obj);
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({}));
        }
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            job_defaults(next);
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        let policy = obj.pointer("/spec/template/spec/restartPolicy");
        if let Some(policy) = policy
            && policy != "OnFailure"
            && policy != "Never"
        {
            check.errors.push(FieldError::not_supported(
                "spec.template.spec.restartPolicy",
                policy,
                &[json!("OnFailure"), json!("Never")],
            ));
        }
    }
}

/// CronJobs: concurrent runs allowed, not suspended, three successful and one failed Job
/// kept unless given; their job template's pods defaulted.
#[derive(Debug)]
pub struct CronJobs;

fn cron_job_defaults(obj: &mut Value) {
    if let Some(spec) = obj
        .as_object_mut()
        .and_then(|o| o.entry("spec").or_insert(json!({})).as_object_mut())
    {
        set_default(spec, "concurrencyPolicy", json!("Allow"));
        set_default(spec, "suspend", json!(false));
        set_default(spec, "successfulJobsHistoryLimit", json!(3));
        set_default(spec, "failedJobsHistoryLimit", json!(1));
    }
    default_pod_template(obj, "/spec/jobTemplate/spec/template");
}

impl ResourceStrategy for CronJobs {
    fn pod_admission(&self) -> Option<PodAdmission> {
        Some(PodAdmission::Template("/spec/jobTemplate/spec/template"))
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let spec = |f| doc("batch/v1", "CronJobSpec", f);
        let status = |f| doc("batch/v1", "CronJobStatus", f);
        vec![
            PrinterColumn::cell("Schedule", "string", spec("schedule"), |o, _| {
                workload::text(o.pointer("/spec/schedule"))
            }),
            PrinterColumn::cell("Timezone", "string", spec("timeZone"), |o, _| {
                workload::or_none(o.pointer("/spec/timeZone"))
            }),
            PrinterColumn::cell("Suspend", "boolean", spec("suspend"), |o, _| {
                json!(
                    o.pointer("/spec/suspend")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                )
            }),
            PrinterColumn::cell("Active", "integer", status("active"), |o, _| {
                json!(
                    o.pointer("/status/active")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len)
                )
            }),
            PrinterColumn::cell(
                "Last Schedule",
                "string",
                status("lastScheduleTime"),
                |o, now| match o
                    .pointer("/status/lastScheduleTime")
                    .and_then(Value::as_str)
                    .and_then(crate::meta::parse_time)
                {
                    Some(t) => json!(human_age(now - t)),
                    None => json!("<none>"),
                },
            ),
            PrinterColumn::age(),
            PrinterColumn::cell(
                "Containers",
                "string",
                "Names of each container in the template.",
                |o, _| {
                    workload::container_field(
                        o.pointer("/spec/jobTemplate/spec/template/spec"),
                        "name",
                    )
                },
            )
            .wide(),
            PrinterColumn::cell(
                "Images",
                "string",
                "Images referenced by each container in the template.",
                |o, _| {
                    workload::container_field(
                        o.pointer("/spec/jobTemplate/spec/template/spec"),
                        "image",
                    )
                },
            )
            .wide(),
            PrinterColumn::cell(
                "Selector",
                "string",
                doc("batch/v1", "JobSpec", "selector"),
                |o, _| workload::selector(o.pointer("/spec/jobTemplate/spec/selector")),
            )
            .wide(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        cron_job_defaults(obj);
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), Value::Object(Map::new()));
        }
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            cron_job_defaults(next);
        }
    }

    fn validate(&self, obj: &mut Value, check: &mut Validation<'_>) {
        if obj
            .pointer("/spec/schedule")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            check.errors.push(FieldError::required("spec.schedule", ""));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::prepare_create;
    use crate::registry::Registry;

    fn create(plural: &str, obj: Value) -> Result<Value, crate::error::ApiError> {
        let info = Registry::with_builtins()
            .lookup("batch", "v1", plural)
            .unwrap();
        prepare_create(&info, "ns", obj, "2026-01-01T00:00:00Z")
    }

    fn pod(restart: &str) -> Value {
        json!({"spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "i"}]}})
    }

    #[test]
    fn a_job_gets_its_defaults_and_a_selector_of_its_own_uid() {
        let job = create(
            "jobs",
            json!({"metadata": {"name": "j"}, "spec": {"template": pod("Never")}}),
        )
        .unwrap();
        let uid = job.uid().to_string();
        assert_eq!(job["spec"]["completions"], 1);
        assert_eq!(job["spec"]["parallelism"], 1);
        assert_eq!(job["spec"]["backoffLimit"], 6);
        assert_eq!(job["spec"]["completionMode"], "NonIndexed");
        assert_eq!(job["spec"]["suspend"], false);
        assert_eq!(job["spec"]["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(
            job["spec"]["selector"],
            json!({"matchLabels": {CONTROLLER_UID: uid}})
        );
        let labels = &job["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["job-name"], "j");
        assert_eq!(labels["batch.kubernetes.io/job-name"], "j");
        assert_eq!(labels["controller-uid"], json!(uid));
        assert_eq!(job["status"], json!({}));
    }

    #[test]
    fn a_job_whose_pods_restart_always_is_refused() {
        let err = create(
            "jobs",
            json!({"metadata": {"name": "j"}, "spec": {"template": pod("Always")}}),
        )
        .err()
        .unwrap();
        assert_eq!(
            err.to_string(),
            "Job.batch \"j\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
        );
    }

    #[test]
    fn a_cron_job_gets_its_defaults_and_needs_a_schedule() {
        let cj = create(
            "cronjobs",
            json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *",
                "jobTemplate": {"spec": {"template": pod("OnFailure")}}}}),
        )
        .unwrap();
        assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
        assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 3);
        assert_eq!(cj["spec"]["failedJobsHistoryLimit"], 1);
        assert_eq!(cj["spec"]["suspend"], false);
        let err = create("cronjobs", json!({"metadata": {"name": "c"}, "spec": {}}))
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("spec.schedule: Required value"),
            "{err}"
        );
    }

    #[test]
    fn job_columns_read_like_kubectl() {
        let job = json!({"spec": {"completions": 3}, "status": {"succeeded": 1,
            "startTime": "1970-01-01T00:00:00Z",
            "conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(job_status(&job), json!("Complete"));
        assert_eq!(job_completions(&job), json!("1/3"));
        assert_eq!(job_duration(&job, 90), json!("90s"));
        assert_eq!(job_status(&json!({})), json!("Running"));
    }
}

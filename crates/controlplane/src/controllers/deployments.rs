//! The deployment controller: each Deployment gets a ReplicaSet for its template, scaled as its
//! strategy says, and reports their Pods in its status and conditions (the decisions are
//! [`super::deployment_decision`]'s). It runs once ReplicaSets are served.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::deployment_decision::{Action, Facts, REVISION, plan};
use super::{create, set, update, warn_failed};
use crate::api::ApiServer;
use crate::meta::{ObjectMeta, now_rfc3339, parse_time};
use crate::resource::Part;
use crate::storage::{Event, EventType};

pub(super) const DEPLOY_KEY: &str = "apps/deployments";
pub(super) const RS_KEY: &str = "apps/replicasets";

/// Deployments to look at again when their progress deadline passes.
#[derive(Default)]
pub(super) struct Deadlines(BTreeMap<(String, String), Instant>);

impl Deadlines {
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.0.values().min().copied()
    }

    /// The Deployments whose deadline has come.
    pub(super) fn take_due(&mut self) -> Vec<(String, String)> {
        let now = Instant::now();
        let due: Vec<(String, String)> = self
            .0
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(d, _)| d.clone())
            .collect();
        for d in &due {
            self.0.remove(d);
        }
        due
    }

    fn set(&mut self, ns: &str, name: &str, in_seconds: Option<i64>) {
        let id = (ns.to_string(), name.to_string());
        match in_seconds {
            Some(s) => {
                let secs = u64::try_from(s.max(1)).unwrap_or(1);
                self.0
                    .insert(id, Instant::now() + Duration::from_secs(secs));
            }
            None => {
                self.0.remove(&id);
            }
        }
    }
}

fn served(api: &ApiServer) -> bool {
    api.registry.lookup("apps", "v1", "replicasets").is_some()
}

/// A Deployment changed, or one of its ReplicaSets did.
pub(super) async fn react(api: &ApiServer, deadlines: &mut Deadlines, e: &Event) {
    match &*e.key {
        DEPLOY_KEY if e.kind == EventType::Deleted => deadlines.set(&e.namespace, &e.name, None),
        DEPLOY_KEY => sync(api, deadlines, &e.namespace, &e.name).await,
        RS_KEY => {
            if let Some(owner) = controller_of(&e.decode(), "Deployment") {
                sync(api, deadlines, &e.namespace, &owner).await;
            }
        }
        _ => {}
    }
}

pub(super) async fn resync(api: &ApiServer, deadlines: &mut Deadlines) {
    if !served(api) {
        return;
    }
    let (_, all) = api.store.list(DEPLOY_KEY, None, None);
    for d in all {
        sync(api, deadlines, d.namespace(), d.name()).await;
    }
}

/// The name of `o`'s controller of `kind`, when it has one.
pub(super) fn controller_of(o: &Value, kind: &str) -> Option<String> {
    o.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
        .filter(|r| r.get("kind").and_then(Value::as_str) == Some(kind))
        .and_then(|r| r.get("name").and_then(Value::as_str))
        .map(str::to_string)
}

/// Whether `o`'s controller is the object with this uid.
pub(super) fn controlled_by(o: &Value, uid: &str) -> bool {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("controller").and_then(Value::as_bool) == Some(true)
                    && r.get("uid").and_then(Value::as_str) == Some(uid)
            })
        })
}

/// One sync of the Deployment `ns/name`.
pub(super) async fn sync(api: &ApiServer, deadlines: &mut Deadlines, ns: &str, name: &str) {
    if !served(api) {
        return;
    }
    let Some(d) = api.store.get(DEPLOY_KEY, ns, name) else {
        return;
    };
    let (_, all) = api.store.list(RS_KEY, Some(ns), None);
    let owned: Vec<Value> = all
        .iter()
        .filter(|rs| controlled_by(rs, d.uid()))
        .map(|rs| rs.as_ref().clone())
        .collect();
    let now = now_rfc3339();
    let decided = plan(&Facts {
        deployment: &d,
        replica_sets: &owned,
        now: &now,
        now_seconds: parse_time(&now).unwrap_or(0),
    });
    deadlines.set(ns, name, decided.recheck_in_seconds);
    for action in decided.actions {
        match action {
            Action::Create(rs) => {
                let rs_name = rs.name().to_string();
                match create(api, RS_KEY, ns, rs).await {
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        // Taken by a ReplicaSet this Deployment does not control: the next
                        // template hash counts the collision.
                        if api
                            .store
                            .get(RS_KEY, ns, &rs_name)
                            .is_some_and(|other| !controlled_by(&other, d.uid()))
                        {
                            let result = update(api, DEPLOY_KEY, ns, name, Part::Status, |cur| {
                                let n = cur
                                    .pointer("/status/collisionCount")
                                    .and_then(Value::as_i64)
                                    .unwrap_or(0);
                                let mut next = cur.clone();
                                set(&mut next, &["status", "collisionCount"], json!(n + 1));
                                Some(next)
                            })
                            .await;
                            warn_failed(
                                "counting a ReplicaSet name collision",
                                DEPLOY_KEY,
                                ns,
                                name,
                                result,
                            );
                        }
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(
                            deployment = name, namespace = ns, error = %e,
                            "creating a ReplicaSet failed"
                        );
                        return;
                    }
                }
            }
            Action::Scale {
                name: rs,
                replicas,
                annotations,
            } => {
                let result = update(api, RS_KEY, ns, &rs, Part::Main, |cur| {
                    let mut next = cur.clone();
                    set(&mut next, &["spec", "replicas"], json!(replicas));
                    crate::meta::meta_mut(&mut next)
                        .insert("annotations".into(), Value::Object(annotations.clone()));
                    Some(next)
                })
                .await;
                warn_failed("scaling a ReplicaSet", RS_KEY, ns, &rs, result);
            }
            Action::Status { revision, status } => {
                let result = update(api, DEPLOY_KEY, ns, name, Part::Status, |cur| {
                    let mut next = cur.clone();
                    if let Some(r) = &revision {
                        set(&mut next, &["metadata", "annotations", REVISION], json!(r));
                    }
                    set(&mut next, &["status"], status.clone());
                    Some(next)
                })
                .await;
                warn_failed(
                    "reporting a Deployment's status",
                    DEPLOY_KEY,
                    ns,
                    name,
                    result,
                );
            }
        }
    }
}

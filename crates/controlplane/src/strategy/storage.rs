//! storage.k8s.io/v1: StorageClasses, CSIDrivers, CSINodes and VolumeAttachments (the rest are
//! plain). Nothing provisions or attaches volumes here.

use serde_json::{Value, json};

use super::set_default;
use crate::meta::ObjectMeta;
use crate::resource::{Part, ResourceInfo, ResourceStrategy};
use crate::table::{PrinterColumn, doc, workload};

/// The annotation that makes a StorageClass the default one.
const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// StorageClasses: volumes deleted with their claims and bound at once unless given; deletes
/// answer with the object.
#[derive(Debug)]
pub struct StorageClasses;

fn storage_class_defaults(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        set_default(o, "reclaimPolicy", json!("Delete"));
        set_default(o, "volumeBindingMode", json!("Immediate"));
    }
}

impl ResourceStrategy for StorageClasses {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let field = |f| doc("storage.k8s.io/v1", "StorageClass", f);
        vec![
            // The name column marks the default class, as kubectl shows it.
            PrinterColumn::cell(
                "Name",
                "string",
                doc("meta.k8s.io/v1", "ObjectMeta", "name"),
                |o, _| {
                    let default = o
                        .pointer("/metadata/annotations")
                        .and_then(|a| a.get(DEFAULT_CLASS))
                        == Some(&json!("true"));
                    json!(match default {
                        true => format!("{} (default)", o.name()),
                        false => o.name().to_string(),
                    })
                },
            )
            .named(),
            PrinterColumn::cell("Provisioner", "string", field("provisioner"), |o, _| {
                workload::text(o.get("provisioner"))
            }),
            PrinterColumn::cell("ReclaimPolicy", "string", field("reclaimPolicy"), |o, _| {
                workload::text(o.get("reclaimPolicy"))
            }),
            PrinterColumn::cell(
                "VolumeBindingMode",
                "string",
                field("volumeBindingMode"),
                |o, _| workload::text(o.get("volumeBindingMode")),
            ),
            PrinterColumn::cell(
                "AllowVolumeExpansion",
                "string",
                field("allowVolumeExpansion"),
                |o, _| {
                    json!(
                        o.get("allowVolumeExpansion")
                            .and_then(Value::as_bool)
                            .unwrap_or(false)
                    )
                },
            ),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        storage_class_defaults(obj);
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            storage_class_defaults(next);
        }
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// CSIDrivers: kube-apiserver's spec defaults; deletes answer with the object.
#[derive(Debug)]
pub struct CsiDrivers;

fn csi_driver_defaults(obj: &mut Value) {
    let Some(spec) = obj
        .as_object_mut()
        .and_then(|o| o.entry("spec").or_insert(json!({})).as_object_mut())
    else {
        return;
    };
    set_default(spec, "attachRequired", json!(true));
    set_default(spec, "podInfoOnMount", json!(false));
    set_default(spec, "storageCapacity", json!(false));
    set_default(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
    set_default(spec, "requiresRepublish", json!(false));
    set_default(spec, "volumeLifecycleModes", json!(["Persistent"]));
}

impl ResourceStrategy for CsiDrivers {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        let spec = |f| doc("storage.k8s.io/v1", "CSIDriverSpec", f);
        vec![
            PrinterColumn::cell(
                "AttachRequired",
                "boolean",
                spec("attachRequired"),
                |o, _| {
                    json!(
                        o.pointer("/spec/attachRequired")
                            .and_then(Value::as_bool)
                            .unwrap_or(true)
                    )
                },
            ),
            PrinterColumn::cell(
                "PodInfoOnMount",
                "boolean",
                spec("podInfoOnMount"),
                |o, _| {
                    json!(
                        o.pointer("/spec/podInfoOnMount")
                            .and_then(Value::as_bool)
                            .unwrap_or(false)
                    )
                },
            ),
            PrinterColumn::cell(
                "StorageCapacity",
                "boolean",
                spec("storageCapacity"),
                |o, _| {
                    json!(
                        o.pointer("/spec/storageCapacity")
                            .and_then(Value::as_bool)
                            .unwrap_or(false)
                    )
                },
            ),
            PrinterColumn::cell("TokenRequests", "string", spec("tokenRequests"), |o, _| {
                let audiences: Vec<&str> = o
                    .pointer("/spec/tokenRequests")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t.get("audience").and_then(Value::as_str))
                    .collect();
                json!(match audiences.is_empty() {
                    true => "<unset>".to_string(),
                    false => audiences.join(","),
                })
            }),
            PrinterColumn::cell(
                "RequiresRepublish",
                "boolean",
                spec("requiresRepublish"),
                |o, _| {
                    json!(
                        o.pointer("/spec/requiresRepublish")
                            .and_then(Value::as_bool)
                            .unwrap_or(false)
                    )
                },
            ),
            PrinterColumn::cell("Modes", "string", spec("volumeLifecycleModes"), |o, _| {
                let modes: Vec<&str> = o
                    .pointer("/spec/volumeLifecycleModes")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                json!(match modes.is_empty() {
                    true => "<none>".to_string(),
                    false => modes.join(","),
                })
            }),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        csi_driver_defaults(obj);
    }

    fn prepare_for_update(&self, _cur: &Value, next: &mut Value, part: Part) {
        if part == Part::Main {
            csi_driver_defaults(next);
        }
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// CSINodes and VolumeAttachments: deletes answer with the object; a new attachment is not
/// attached.
#[derive(Debug)]
pub struct NodeVolumes {
    /// VolumeAttachments start with `status.attached: false`.
    pub attachments: bool,
}

impl ResourceStrategy for NodeVolumes {
    fn printer_columns(&self) -> Vec<PrinterColumn> {
        if !self.attachments {
            return vec![
                PrinterColumn::cell(
                    "Drivers",
                    "integer",
                    "Drivers indicates the number of CSI drivers registered on the node",
                    |o, _| {
                        json!(
                            o.pointer("/spec/drivers")
                                .and_then(Value::as_array)
                                .map_or(0, Vec::len)
                        )
                    },
                ),
                PrinterColumn::age(),
            ];
        }
        let spec = |f| doc("storage.k8s.io/v1", "VolumeAttachmentSpec", f);
        vec![
            PrinterColumn::cell("Attacher", "string", spec("attacher"), |o, _| {
                workload::text(o.pointer("/spec/attacher"))
            })
            .named(),
            PrinterColumn::cell(
                "PV",
                "string",
                doc(
                    "storage.k8s.io/v1",
                    "VolumeAttachmentSource",
                    "persistentVolumeName",
                ),
                |o, _| workload::text(o.pointer("/spec/source/persistentVolumeName")),
            ),
            PrinterColumn::cell("Node", "string", spec("nodeName"), |o, _| {
                workload::text(o.pointer("/spec/nodeName"))
            }),
            PrinterColumn::cell(
                "Attached",
                "boolean",
                doc("storage.k8s.io/v1", "VolumeAttachmentStatus", "attached"),
                |o, _| {
                    json!(
                        o.pointer("/status/attached")
                            .and_then(Value::as_bool)
                            .unwrap_or(false)
                    )
                },
            ),
            PrinterColumn::age(),
        ]
    }

    fn prepare_for_create(&self, _info: &ResourceInfo, obj: &mut Value, _now: &str) {
        if self.attachments
            && let Some(o) = obj.as_object_mut()
        {
            o.insert("status".into(), json!({"attached": false}));
        }
    }

    fn returns_deleted_object(&self) -> bool {
        true
    }
}

/// CSINodes.
pub static CSI_NODES: NodeVolumes = NodeVolumes { attachments: false };
/// VolumeAttachments.
pub static VOLUME_ATTACHMENTS: NodeVolumes = NodeVolumes { attachments: true };

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::prepare_create;
    use crate::registry::Registry;

    fn create(plural: &str, obj: Value) -> Value {
        let info = Registry::with_builtins()
            .lookup("storage.k8s.io", "v1", plural)
            .unwrap();
        prepare_create(&info, "", obj, "2026-01-01T00:00:00Z").unwrap()
    }

    #[test]
    fn storage_classes_and_csi_drivers_get_their_defaults() {
        let sc = create(
            "storageclasses",
            json!({"metadata": {"name": "fast"}, "provisioner": "example.com/disk"}),
        );
        assert_eq!(sc["reclaimPolicy"], "Delete");
        assert_eq!(sc["volumeBindingMode"], "Immediate");
        let driver = create("csidrivers", json!({"metadata": {"name": "d.example.com"}}));
        assert_eq!(driver["spec"]["attachRequired"], true);
        assert_eq!(
            driver["spec"]["volumeLifecycleModes"],
            json!(["Persistent"])
        );
        assert_eq!(driver["spec"]["fsGroupPolicy"], "ReadWriteOnceWithFSType");
    }
}

//! How the CRDs of OCM's kinds are generated from their Rust types, so that they accept and reject
//! the same objects as OCM's own CRDs, and the schema pieces those kinds share.
//!
//! kube's derive marks every `Option` field `nullable` and requires `spec`. OCM's Go types have
//! optional fields, not nullable ones (an API server keeps a `null` only in a nullable field and
//! drops it elsewhere), and most OCM kinds may omit `spec`. `crd` therefore takes the derive's
//! names, scope, printer columns and subresources but generates the schema itself: an unset field
//! is absent, `null` is allowed only where a field says `nullable` (a taint's `timeAdded`), `spec`
//! is required only where OCM requires it, and the root declares `apiVersion`, `kind` and
//! `metadata` as OCM's CRDs do.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, JSONSchemaProps, ServiceReference,
    WebhookClientConfig, WebhookConversion,
};
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;
use schemars::generate::SchemaSettings;
use schemars::transform::{AddNullable, Transform, transform_subschemas};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

use super::fleet::SYSTEM_NAMESPACE;

/// Whether a kind's objects must have a `spec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spec {
    Required,
    Optional,
}

/// The CRD of one version of an OCM kind, with the schema generated as this module describes.
pub(crate) fn crd<K: CustomResourceExt + JsonSchema>(spec: Spec) -> CustomResourceDefinition {
    let mut crd = K::crd();
    let settings = SchemaSettings::openapi3().with(|settings| {
        settings.inline_subschemas = true;
        settings.meta_schema = None;
        settings
            .transforms
            .retain(|transform| !transform.is::<AddNullable>());
        settings.transforms.push(Box::new(OmitNull));
        settings
            .transforms
            .push(Box::new(kube::core::schema::StructuralSchemaRewriter));
        settings.transforms.push(Box::new(IntOrStringBranches));
    });
    let mut root = SchemaGenerator::new(settings)
        .into_root_schema_for::<K>()
        .to_value();
    if let Value::Object(root) = &mut root {
        root.remove("title");
        let properties = root.entry("properties").or_insert_with(|| json!({}));
        properties["apiVersion"] = json!({"type": "string"});
        properties["kind"] = json!({"type": "string"});
        properties["metadata"] = json!({"type": "object"});
        match spec {
            Spec::Required => {
                root.insert("required".into(), json!(["spec"]));
            }
            Spec::Optional => {
                root.remove("required");
            }
        }
    }
    let schema: JSONSchemaProps =
        serde_json::from_value(root).expect("a generated schema is a valid JSONSchemaProps");
    let version = &mut crd.spec.versions[0];
    version.schema.get_or_insert_default().open_api_v3_schema = Some(schema);
    crd
}

/// One CRD serving every version of `versions` (each made by [`crd`]), storing `storage`.
pub(crate) fn served_together(
    versions: Vec<CustomResourceDefinition>,
    storage: &str,
) -> CustomResourceDefinition {
    merge_crds(versions, storage).expect("the versions of one kind merge into one CRD")
}

/// The conversion between the versions of a CRD: a webhook at `/convert` of the `fleetform-hub`
/// Service in `fleetform-system`, as an OCM hub's addon manager serves one, converting with
/// [`super::conversion::convert_addon`].
pub(crate) fn conversion_webhook() -> CustomResourceConversion {
    CustomResourceConversion {
        strategy: "Webhook".into(),
        webhook: Some(WebhookConversion {
            conversion_review_versions: vec!["v1".into()],
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: SYSTEM_NAMESPACE.into(),
                    name: CONVERSION_SERVICE.into(),
                    path: Some(CONVERSION_PATH.into()),
                    port: Some(CONVERSION_PORT),
                }),
                ..WebhookClientConfig::default()
            }),
        }),
    }
}

/// Service in `fleetform-system` that serves CRD conversion.
pub const CONVERSION_SERVICE: &str = "fleetform-hub";
/// Path of the conversion webhook on [`CONVERSION_SERVICE`].
pub const CONVERSION_PATH: &str = "/convert";
/// Port of [`CONVERSION_SERVICE`] serving conversion.
pub const CONVERSION_PORT: i32 = 9443;

/// Removes the `null` schemars adds to an `Option`'s schema, so an unset field is simply absent.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OmitNull;

impl Transform for OmitNull {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(object) = schema.as_object_mut() {
            if let Some(Value::Array(types)) = object.get_mut("type") {
                types.retain(|type_| type_ != "null");
                if let [only] = types.as_slice() {
                    let only = only.clone();
                    object.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(values)) = object.get_mut("enum") {
                values.retain(|value| !value.is_null());
            }
            let null_branch = |branch: &Value| branch.get("type") == Some(&json!("null"));
            if let Some(Value::Array(branches)) = object.get_mut("anyOf")
                && branches.iter().any(null_branch)
            {
                branches.retain(|branch| !null_branch(branch));
                if let [only] = branches.as_slice()
                    && let Value::Object(only) = only.clone()
                {
                    object.remove("anyOf");
                    for (key, value) in only {
                        object.entry(key).or_insert(value);
                    }
                }
            }
        }
        transform_subschemas(self, schema);
    }
}

/// Gives the branches of an int-or-string's `anyOf` their types back, as OCM's CRDs declare
/// them (kube's structural rewrite empties every `anyOf` branch).
#[derive(Clone, Copy, Debug, Default)]
struct IntOrStringBranches;

impl Transform for IntOrStringBranches {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(object) = schema.as_object_mut()
            && object.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
            && object.contains_key("anyOf")
        {
            object.insert(
                "anyOf".into(),
                json!([{"type": "integer"}, {"type": "string"}]),
            );
        }
        transform_subschemas(self, schema);
    }
}

/// The string formats kube-apiserver validates in a CRD schema (as it compares them: without
/// `-`, so `date-time` is `datetime`). An integer may say `int32` or `int64`, a number `float`
/// or `double`; any other format is answered on every write of the CRD with `Warning:
/// unrecognized format` and is not checked at all. The wire vocabulary imports no server, so
/// this is the embedded control plane's list (`crd_schema::STRING_FORMATS`) again; a test
/// keeps the two equal.
pub(crate) const STRING_FORMATS: [&str; 26] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

/// Whether kube-apiserver knows `format` on a schema of `type_` (see [`STRING_FORMATS`]).
pub(crate) fn known_format(type_: Option<&str>, format: &str) -> bool {
    match type_ {
        Some("integer") => matches!(format, "int32" | "int64"),
        Some("number") => matches!(format, "float" | "double"),
        None | Some("string") => STRING_FORMATS.contains(&format.replace('-', "").as_str()),
        Some(_) => false,
    }
}

/// `crd` with every `format` of its schemas one kube-apiserver knows. schemars names Rust's
/// integer widths (`uint32`, `uint16`, ...): those become `int32` or `int64` with the width's
/// bounds as `minimum` and `maximum`, so the server still refuses what the type cannot hold; any
/// other unknown format is dropped.
pub(crate) fn with_known_formats(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut value = serde_json::to_value(&crd).expect("a CRD serialises to JSON");
    for version in value
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema") {
            known_formats(schema);
        }
    }
    serde_json::from_value(value).expect("a CRD with other formats is still a CRD")
}

/// [`with_known_formats`] on one schema and the schemas in it.
fn known_formats(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let type_ = object
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(format) = object
        .get("format")
        .and_then(Value::as_str)
        .map(str::to_string)
        && !known_format(type_.as_deref(), &format)
    {
        let bounds: Option<(&str, f64, f64)> = match format.as_str() {
            "int8" => Some(("int32", i8::MIN.into(), i8::MAX.into())),
            "int16" => Some(("int32", i16::MIN.into(), i16::MAX.into())),
            "uint8" => Some(("int32", 0.0, u8::MAX.into())),
            "uint16" => Some(("int32", 0.0, u16::MAX.into())),
            "uint32" => Some(("int64", 0.0, u32::MAX.into())),
            "uint64" | "uint" => Some(("int64", 0.0, i64::MAX as f64)),
            _ => None,
        };
        match bounds {
            Some((known, minimum, maximum)) if type_.as_deref() == Some("integer") => {
                object.insert("format".into(), json!(known));
                object.entry("minimum").or_insert(json!(minimum));
                object.entry("maximum").or_insert(json!(maximum));
            }
            _ => {
                object.remove("format");
            }
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(child) = object.get_mut(key) {
            known_formats(child);
        }
    }
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(children)) = object.get_mut(key) {
            children.values_mut().for_each(known_formats);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(children)) = object.get_mut(key) {
            children.iter_mut().for_each(known_formats);
        }
    }
}

/// `pattern` of a qualified name (an optional DNS subdomain prefix and `/`, then a name), as
/// Kubernetes checks condition types and OCM checks taint keys.
pub(crate) const QUALIFIED_NAME: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";
/// `pattern` of a DNS-1123 label (a namespace's name).
pub(crate) const DNS_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// `pattern` of a DNS-1123 subdomain.
pub(crate) const DNS_SUBDOMAIN: &str =
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)$";

/// A list of Kubernetes conditions (`metav1.Condition`) with the API's own checks, one per type.
pub(crate) fn conditions(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = condition_list(generator);
    schema.insert("x-kubernetes-list-type".into(), json!("map"));
    schema.insert("x-kubernetes-list-map-keys".into(), json!(["type"]));
    schema
}

/// A list of Kubernetes conditions with no list type (as ManagedClusterSet and
/// ManagedClusterSetBinding declare theirs).
pub(crate) fn condition_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "description": "One aspect of the object's state.",
            "type": "object",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {
                    "description": "When the status last changed.",
                    "type": "string", "format": "date-time",
                },
                "message": {
                    "description": "A human-readable explanation; may be empty.",
                    "type": "string", "maxLength": 32768,
                },
                "observedGeneration": {
                    "description": "The metadata.generation the condition was set for.",
                    "type": "integer", "format": "int64", "minimum": 0,
                },
                "reason": {
                    "description": "Why the status last changed, in CamelCase.",
                    "type": "string", "minLength": 1, "maxLength": 1024,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                },
                "status": {
                    "description": "True, False or Unknown.",
                    "type": "string", "enum": ["True", "False", "Unknown"],
                },
                "type": {
                    "description": "The aspect, in CamelCase or as a qualified name.",
                    "type": "string", "maxLength": 316, "pattern": QUALIFIED_NAME,
                },
            },
        },
    })
}

/// Resource quantities by resource name (`cpu: "4"`, `memory: 16Gi`).
pub(crate) fn resource_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": true,
        },
    })
}

/// A count or a percentage (`3`, `"25%"`).
pub(crate) fn count_or_percent(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": "^((100|[0-9]{1,2})%|[0-9]+)$",
        "x-kubernetes-int-or-string": true,
    })
}

/// A Kubernetes label selector, replaced as a whole by server-side apply.
pub(crate) fn label_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "matchExpressions": {
                "description": "Requirements that must all hold.",
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": {"type": "string"},
                        "operator": {
                            "description": "In, NotIn, Exists or DoesNotExist.",
                            "type": "string",
                        },
                        "values": {
                            "type": "array",
                            "x-kubernetes-list-type": "atomic",
                            "items": {"type": "string"},
                        },
                    },
                },
            },
            "matchLabels": {
                "description": "Labels that must all be present with these values.",
                "type": "object",
                "additionalProperties": {"type": "string"},
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_known_formats_are_the_embedded_control_planes() {
        assert_eq!(
            STRING_FORMATS.as_slice(),
            fleetform_controlplane::crd_schema::STRING_FORMATS
        );
    }

    #[test]
    fn omit_null_leaves_only_the_optional_values_type() {
        let mut schema = json_schema!({
            "type": "object",
            "properties": {
                "name": {"type": ["string", "null"]},
                "mode": {"type": ["string", "null"], "enum": ["A", "B", null]},
                "meta": {"anyOf": [{"type": "object", "properties": {}}, {"type": "null"}]},
            },
        });
        OmitNull.transform(&mut schema);
        assert_eq!(
            schema.to_value(),
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "mode": {"type": "string", "enum": ["A", "B"]},
                    "meta": {"type": "object", "properties": {}},
                },
            })
        );
    }
}

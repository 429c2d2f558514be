//! The fleet repo format's JSON Schemas, generated from the types that read it.
//!
//! Every field of a document, its type, whether it is required and its default come from the
//! [`crate::api::fleet`] types through schemars, which follows their serde attributes: a field the
//! types gain is in the schema, and a field the schema knows is one the types read. [`overlay`]
//! adds only what a type cannot say (bounds, lengths, patterns, a default applied outside serde),
//! and every object is closed (`additionalProperties: false`) so that a misspelt field is an error
//! with a suggestion, not silently ignored. An overlay entry naming a field the types lack, or
//! saying something else than they do (another type, another default), fails generation.
//!
//! Every field a value is written for has an example (`examples`), which the fleet repo
//! reference shows and editors offer; a field without one fails generation.
//!
//! The overlay is not written as schemars attributes on the types: those are also the Hub and
//! Spoke CRDs' schema (kube's derive), and a bound there would change what the hub's API server
//! accepts.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::transform::{Transform, transform_subschemas};
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use crate::api::fleet::{
    API_VERSION, AddOn, AddOnRegistration, AddOnSpec, AgentSpec, AutoApprovalSpec,
    AvailabilitySpec, CleanupSpec, ConfiguredAddon, GroupSelector, HealthCheck, Hub, HubSpec,
    KubeconfigSource, RegistrationSpec, RegistrationSubject, RolloutGroup, RolloutSpec,
    SecretKeyRef, SecretRef, Spoke, SpokeAddon, SpokeSpec, SpokeTaint, VERSION,
};
use crate::api::schema::{DNS_LABEL, OmitNull};
use crate::api::vocabulary::CLUSTER_SET_DEFAULT;
use crate::fleet::Kind;

/// Where `$ref`s point in a generated schema.
const DEFINITIONS: &str = "#/$defs/";

/// Why the fleet schemas cannot be generated: the overlay and the types disagree. A field is
/// named `Type.field`, by the type's schema name.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum SchemaError {
    #[error("the overlay refines {type_name}, which no fleet document holds")]
    UnknownType { type_name: String },
    #[error("the overlay refines {field}, a field its type does not have")]
    UnknownField { field: String },
    #[error("the overlay sets {keyword} of {field} to {overlay}, where the type says {generated}")]
    Conflict {
        field: String,
        keyword: String,
        generated: Value,
        overlay: Value,
    },
    #[error("the overlay adds {keyword} to {field} as a new schema; it may only add keywords")]
    NewSubschema { field: String, keyword: String },
    #[error("{field} is an integer without minimum and maximum in the overlay")]
    UnboundedInteger { field: String },
    #[error("{field} has no example in the overlay")]
    NoExample { field: String },
}

/// What the fleet format says of one field beyond its type.
struct Refinement {
    type_name: Cow<'static, str>,
    field: &'static str,
    keywords: Value,
}

fn refine<T: JsonSchema>(field: &'static str, keywords: Value) -> Refinement {
    Refinement {
        type_name: T::schema_name(),
        field,
        keywords,
    }
}

/// What the types cannot say: every integer's bounds, which strings may not be empty, patterns,
/// the cluster set a spoke joins when it names none (applied by [`SpokeSpec::cluster_set`], not
/// by serde).
fn overlay() -> Vec<Refinement> {
    let non_empty = || json!({"minLength": 1});
    let non_empty_items = || json!({"items": {"minLength": 1}});
    let lease_duration = || json!({"minimum": 1, "maximum": 3600});
    let cluster_claims_max = || json!({"minimum": 0, "maximum": 1000});
    // A count or a percentage (`SpokeCount`); at least one spoke at a time, but no failure may
    // be allowed.
    let spoke_count = |least: u32| {
        let percent = if least == 0 {
            r"^(100|[1-9]?[0-9])%$"
        } else {
            r"^(100|[1-9][0-9]?)%$"
        };
        json!({"type": ["integer", "string"], "minimum": least, "maximum": 100_000, "pattern": percent})
    };
    // What a value looks like, for the reference and editors.
    let example = |value: Value| json!({"examples": [value]});
    let with_example = |mut keywords: Value, value: Value| {
        keywords["examples"] = json!([value]);
        keywords
    };
    vec![
        refine::<KubeconfigSource>("context", with_example(non_empty(), json!("prod-eu"))),
        refine::<KubeconfigSource>("inCluster", example(json!(true))),
        refine::<KubeconfigSource>("embedded", example(json!({}))),
        refine::<SecretKeyRef>(
            "namespace",
            with_example(non_empty(), json!("fleetform-system")),
        ),
        refine::<SecretKeyRef>(
            "name",
            with_example(non_empty(), json!("edge-1-kubeconfig")),
        ),
        refine::<SecretKeyRef>("key", with_example(non_empty(), json!("kubeconfig"))),
        refine::<SecretRef>(
            "namespace",
            with_example(non_empty(), json!("fleetform-system")),
        ),
        refine::<SecretRef>(
            "name",
            with_example(non_empty(), json!("metrics-signer-ca")),
        ),
        refine::<AgentSpec>("version", with_example(non_empty(), json!("0.2.0"))),
        refine::<AgentSpec>(
            "image",
            with_example(non_empty(), json!("registry.example.com/fleetform:0.2.0")),
        ),
        refine::<HubSpec>(
            "apiServer",
            json!({"pattern": r"^https?://[^\s]+$", "examples": ["https://hub.example.com:6443"]}),
        ),
        refine::<HubSpec>(
            "caBundle",
            with_example(
                non_empty(),
                json!("-----BEGIN CERTIFICATE-----\nMIIB…\n-----END CERTIFICATE-----\n"),
            ),
        ),
        refine::<RegistrationSpec>(
            "leaseDurationSeconds",
            with_example(lease_duration(), json!(30)),
        ),
        refine::<RegistrationSpec>(
            "clusterClaimsMax",
            with_example(cluster_claims_max(), json!(50)),
        ),
        // Kubernetes refuses a CSR's expirationSeconds under ten minutes.
        refine::<RegistrationSpec>(
            "clientCertExpirationSeconds",
            json!({"minimum": 600, "maximum": 31_536_000, "examples": [604_800]}),
        ),
        refine::<AutoApprovalSpec>(
            "users",
            json!({"items": {"minLength": 1}, "uniqueItems": true,
                   "examples": [["system:serviceaccount:open-cluster-management:cluster-bootstrap"]]}),
        ),
        refine::<SpokeSpec>("hubRef", with_example(non_empty(), json!("hub"))),
        refine::<SpokeSpec>(
            "leaseDurationSeconds",
            with_example(lease_duration(), json!(30)),
        ),
        refine::<SpokeSpec>(
            "clusterClaimsMax",
            with_example(cluster_claims_max(), json!(50)),
        ),
        refine::<SpokeSpec>(
            "addons",
            example(json!(["metrics", {"name": "logging", "installNamespace": "logging"}])),
        ),
        refine::<SpokeSpec>(
            "clusterSet",
            json!({"minLength": 1, "maxLength": 63, "pattern": DNS_LABEL, "default": CLUSTER_SET_DEFAULT,
                   "examples": ["edge"]}),
        ),
        refine::<ConfiguredAddon>("name", with_example(non_empty(), json!("logging"))),
        refine::<ConfiguredAddon>(
            "installNamespace",
            with_example(non_empty(), json!("logging")),
        ),
        refine::<AvailabilitySpec>("mode", example(json!("poll"))),
        refine::<AvailabilitySpec>(
            "pollIntervalSeconds",
            json!({"minimum": 1, "maximum": 86_400, "examples": [60]}),
        ),
        refine::<AvailabilitySpec>(
            "backoff",
            json!({"minimum": 1, "maximum": 100, "examples": [2]}),
        ),
        refine::<AvailabilitySpec>(
            "backoffDelaySeconds",
            json!({"minimum": 0, "maximum": 86_400, "examples": [10]}),
        ),
        refine::<AvailabilitySpec>(
            "backoffLimit",
            json!({"minimum": -1, "maximum": 1_000_000, "examples": [5]}),
        ),
        refine::<CleanupSpec>("forceClusterDrain", example(json!(true))),
        refine::<CleanupSpec>("purgeAgentNamespace", example(json!(false))),
        refine::<CleanupSpec>(
            "unjoinTimeoutSeconds",
            json!({"minimum": 0, "maximum": 604_800, "examples": [1800]}),
        ),
        // OCM's limits of a taint's key (a qualified name) and value.
        refine::<SpokeTaint>(
            "key",
            json!({"minLength": 1, "maxLength": 316, "examples": ["example.com/maintenance"]}),
        ),
        refine::<SpokeTaint>("value", json!({"maxLength": 1024, "examples": ["true"]})),
        refine::<SpokeTaint>("effect", example(json!("NoSelect"))),
        refine::<RolloutSpec>("strategy", example(json!("Progressive"))),
        refine::<RolloutSpec>("maxConcurrency", with_example(spoke_count(1), json!("10%"))),
        refine::<RolloutSpec>("maxFailures", with_example(spoke_count(0), json!(2))),
        refine::<RolloutSpec>(
            "minSuccessSeconds",
            json!({"minimum": 0, "maximum": 86_400, "examples": [300]}),
        ),
        refine::<RolloutSpec>(
            "progressDeadlineSeconds",
            json!({"minimum": 1, "maximum": 604_800, "examples": [900]}),
        ),
        refine::<RolloutSpec>("offline", example(json!("Wait"))),
        refine::<RolloutSpec>("paused", example(json!(true))),
        refine::<RolloutGroup>(
            "name",
            json!({"minLength": 1, "maxLength": 63, "pattern": DNS_LABEL, "examples": ["canary"]}),
        ),
        refine::<RolloutGroup>(
            "spokes",
            json!({"items": {"minLength": 1}, "uniqueItems": true, "examples": [["edge-1", "edge-2"]]}),
        ),
        refine::<RolloutGroup>("maxConcurrency", with_example(spoke_count(1), json!(1))),
        refine::<GroupSelector>("matchLabels", example(json!({"env": "canary"}))),
        refine::<AddOnSpec>(
            "installNamespace",
            with_example(non_empty(), json!("metrics-agent")),
        ),
        refine::<HealthCheck>("mode", example(json!("Customized"))),
        refine::<AddOnRegistration>(
            "signerName",
            with_example(non_empty(), json!("example.com/metrics")),
        ),
        refine::<RegistrationSubject>("user", with_example(non_empty(), json!("metrics-agent"))),
        refine::<RegistrationSubject>(
            "groups",
            with_example(non_empty_items(), json!(["metrics-agents"])),
        ),
        refine::<RegistrationSubject>(
            "organizationUnits",
            with_example(non_empty_items(), json!(["edge"])),
        ),
    ]
}

/// The JSON Schema of a kind's documents.
pub fn schema(kind: Kind) -> Result<Value, SchemaError> {
    Ok(document(kind, &definitions(&overlay())?))
}

/// The schema of every type of the fleet format, by schemars name, refined by `overlay`.
fn definitions(overlay: &[Refinement]) -> Result<Map<String, Value>, SchemaError> {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.transforms = vec![Box::new(OmitNull), Box::new(FleetFormat)];
        })
        .into_generator();
    generator.subschema_for::<HubSpec>();
    generator.subschema_for::<SpokeSpec>();
    generator.subschema_for::<AddOnSpec>();
    generator.subschema_for::<ConfiguredAddon>();
    let mut definitions = generator.take_definitions(true);
    for refinement in overlay {
        apply(&mut definitions, refinement)?;
    }
    spoke_addon(&mut definitions)?;
    check_bounds(&definitions)?;
    check_examples(&definitions)?;
    Ok(definitions)
}

/// Merges a refinement into its field's schema: keywords the type does not set are added, those
/// it sets must be repeated unchanged, and subschemas (`items`) are refined, never added.
fn apply(definitions: &mut Map<String, Value>, refinement: &Refinement) -> Result<(), SchemaError> {
    let type_name = refinement.type_name.as_ref();
    let field = format!("{type_name}.{}", refinement.field);
    let Some(definition) = definitions.get_mut(type_name) else {
        return Err(SchemaError::UnknownType {
            type_name: type_name.to_string(),
        });
    };
    let Some(Value::Object(target)) = definition
        .get_mut("properties")
        .and_then(|properties| properties.get_mut(refinement.field))
    else {
        return Err(SchemaError::UnknownField { field });
    };
    merge(target, &refinement.keywords).map_err(|(keyword, generated, overlay)| match generated {
        None => SchemaError::NewSubschema {
            field: field.clone(),
            keyword,
        },
        Some(generated) => SchemaError::Conflict {
            field: field.clone(),
            keyword,
            generated,
            overlay,
        },
    })
}

/// The keyword that cannot be merged: what the type says of it (`None`: nothing, and the overlay
/// would add a subschema), and what the overlay says.
type MergeConflict = (String, Option<Value>, Value);

fn merge(target: &mut Map<String, Value>, keywords: &Value) -> Result<(), MergeConflict> {
    let Value::Object(keywords) = keywords else {
        return Err((keywords.to_string(), None, keywords.clone()));
    };
    for (keyword, value) in keywords {
        match (target.get_mut(keyword), value) {
            (Some(Value::Object(generated)), Value::Object(_)) => merge(generated, value)?,
            (Some(generated), _) if generated == value => {}
            (Some(generated), _) => {
                return Err((keyword.clone(), Some(generated.clone()), value.clone()));
            }
            (None, Value::Object(_)) => return Err((keyword.clone(), None, value.clone())),
            (None, _) => {
                target.insert(keyword.clone(), value.clone());
            }
        }
    }
    Ok(())
}

/// A spoke's addon is serde's untagged `name | {name, installNamespace}`; its CRD schema cannot
/// say "string or object" ([`SpokeAddon`]'s own schema keeps it as written). The fleet format
/// makes it one node, a non-empty string or a [`ConfiguredAddon`] mapping, so that an error names
/// the field where an `anyOf` would only say that no branch matched.
fn spoke_addon(definitions: &mut Map<String, Value>) -> Result<(), SchemaError> {
    let unknown = |name: Cow<'static, str>| SchemaError::UnknownType {
        type_name: name.into_owned(),
    };
    let Some(Value::Object(mut node)) = definitions.remove(ConfiguredAddon::schema_name().as_ref())
    else {
        return Err(unknown(ConfiguredAddon::schema_name()));
    };
    let Some(addon) = definitions.get_mut(SpokeAddon::schema_name().as_ref()) else {
        return Err(unknown(SpokeAddon::schema_name()));
    };
    node.insert("type".into(), json!(["string", "object"]));
    node.insert("minLength".into(), json!(1));
    match addon.get("description") {
        Some(description) => node.insert("description".into(), description.clone()),
        None => node.remove("description"),
    };
    *addon = Value::Object(node);
    Ok(())
}

/// Every integer field has both bounds, so that an error can say "between a and b", and a number
/// too large for its Rust type is a schema error with a place, not a document serde cannot read.
fn check_bounds(definitions: &Map<String, Value>) -> Result<(), SchemaError> {
    for (type_name, definition) in definitions {
        let fields = definition.get("properties").and_then(Value::as_object);
        for (field, schema) in fields.into_iter().flatten() {
            let bounded = schema.get("minimum").is_some() && schema.get("maximum").is_some();
            if schema.get("type") == Some(&json!("integer")) && !bounded {
                return Err(SchemaError::UnboundedInteger {
                    field: format!("{type_name}.{field}"),
                });
            }
        }
    }
    Ok(())
}

/// Every field a value is written for has an example: all but those holding an object of
/// fields (or a list of them), whose own fields have theirs.
fn check_examples(definitions: &Map<String, Value>) -> Result<(), SchemaError> {
    let holds_fields = |node: &Value| {
        let node = match node.get("$ref").and_then(Value::as_str) {
            Some(target) => target
                .strip_prefix(DEFINITIONS)
                .and_then(|name| definitions.get(name))
                .unwrap_or(node),
            None => node,
        };
        node.get("type") == Some(&json!("object")) && node.get("properties").is_some()
    };
    for (type_name, definition) in definitions {
        let fields = definition.get("properties").and_then(Value::as_object);
        for (field, schema) in fields.into_iter().flatten() {
            let written = match schema.get("items") {
                Some(items) => !holds_fields(items),
                None => !holds_fields(schema),
            };
            if written && schema.get("examples").is_none() {
                return Err(SchemaError::NoExample {
                    field: format!("{type_name}.{field}"),
                });
            }
        }
    }
    Ok(())
}

/// A kind's document: `apiVersion`, `kind`, `metadata` and the spec type's schema, with the
/// definitions the spec refers to.
fn document(kind: Kind, definitions: &Map<String, Value>) -> Value {
    let (spec, description) = match kind {
        Kind::Hub => (
            HubSpec::schema_name(),
            "A hub cluster that spokes register to.",
        ),
        Kind::Spoke => (
            SpokeSpec::schema_name(),
            "A spoke cluster registered to a hub.",
        ),
        Kind::AddOn => (AddOnSpec::schema_name(), "An addon that spokes may run."),
    };
    let mut required = vec!["apiVersion", "kind", "metadata"];
    if spec_required(kind) {
        required.push("spec");
    }
    json!({
        "$schema": schemars::consts::meta_schemas::DRAFT2020_12,
        "$id": format!("https://fleetform.io/schemas/{VERSION}/{}", file_name(kind)),
        "title": kind.as_str(),
        "description": description,
        "type": "object",
        "additionalProperties": false,
        "required": required,
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": kind.as_str()},
            "metadata": metadata(kind),
            "spec": {"$ref": format!("{DEFINITIONS}{spec}")},
        },
        "$defs": reachable(&spec, definitions),
    })
}

/// The file a kind's schema is published as in `schemas/`.
pub fn file_name(kind: Kind) -> String {
    format!("{}.schema.json", kind.as_str().to_ascii_lowercase())
}

/// Whether a document of `kind` must have a spec: what serde answers when reading one without,
/// so that the schema cannot say otherwise.
fn spec_required(kind: Kind) -> bool {
    let document = json!({
        "apiVersion": API_VERSION,
        "kind": kind.as_str(),
        "metadata": {"name": "probe"},
    });
    match kind {
        Kind::Hub => serde_json::from_value::<Hub>(document).is_err(),
        Kind::Spoke => serde_json::from_value::<Spoke>(document).is_err(),
        Kind::AddOn => serde_json::from_value::<AddOn>(document).is_err(),
    }
}

/// The part of Kubernetes' ObjectMeta a fleet document may set.
fn metadata(kind: Kind) -> Value {
    let strings = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let mut labels = strings.clone();
    labels["description"] = json!(match kind {
        Kind::Spoke =>
            "Labels, synced to the spoke's ManagedCluster (placements and rollout groups select on them).",
        Kind::Hub | Kind::AddOn => "Labels of the document.",
    });
    labels["examples"] = json!([{"env": "prod"}]);
    let mut annotations = strings;
    annotations["description"] = json!("Annotations of the document.");
    annotations["examples"] = json!([{"example.com/owner": "team-edge"}]);
    let name = match kind {
        Kind::Hub => "hub",
        Kind::Spoke => "edge-1",
        Kind::AddOn => "metrics",
    };
    json!({
        "description": format!("Identity of the {kind}."),
        "type": "object",
        "additionalProperties": false,
        "required": ["name"],
        "properties": {
            "name": {
                "type": "string",
                "minLength": 1,
                "description": "Unique name among documents of this kind.",
                "examples": [name],
            },
            "labels": labels,
            "annotations": annotations,
        },
    })
}

/// The definitions `root` refers to, directly or through others.
fn reachable(root: &str, definitions: &Map<String, Value>) -> Map<String, Value> {
    let mut found = Map::new();
    let mut pending = vec![root.to_string()];
    while let Some(name) = pending.pop() {
        if found.contains_key(&name) {
            continue;
        }
        if let Some(definition) = definitions.get(&name) {
            references(definition, &mut pending);
            found.insert(name, definition.clone());
        }
    }
    found
}

fn references(node: &Value, out: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            for (keyword, value) in map {
                match (keyword.as_str(), value) {
                    ("$ref", Value::String(target)) => {
                        out.extend(target.strip_prefix(DEFINITIONS).map(str::to_string));
                    }
                    // A default is a value, not a schema.
                    ("default", _) => {}
                    _ => references(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| references(item, out)),
        _ => {}
    }
}

/// Shapes what schemars generates into the fleet format: an enum is an `enum` (its error then
/// lists the values, where a `oneOf` of constants fails every branch), an integer has no `format`
/// (the overlay bounds each), every object is closed, and descriptions are one line each.
#[derive(Clone, Copy, Debug, Default)]
struct FleetFormat;

impl Transform for FleetFormat {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(object) = schema.as_object_mut() {
            let constants: Option<Vec<Value>> = object
                .get("oneOf")
                .and_then(Value::as_array)
                .and_then(|branches| branches.iter().map(|b| b.get("const").cloned()).collect());
            if let Some(constants) = constants {
                // Each value's own description goes into the enum's, which is all an `enum` has.
                let meanings: Vec<String> = object["oneOf"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|branch| {
                        let description = branch.get("description")?.as_str()?;
                        Some(format!("`{}`: {description}", branch["const"].as_str()?))
                    })
                    .collect();
                if !meanings.is_empty() {
                    let own = object
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let folded = format!("{own} {}", meanings.join(" "));
                    object.insert("description".into(), json!(folded.trim()));
                }
                object.remove("oneOf");
                object.insert("enum".into(), Value::Array(constants));
            }
            if object.contains_key("enum") {
                object.remove("type");
            }
            if object.get("type") == Some(&json!("integer")) {
                object.remove("format");
            }
            if object.get("type") == Some(&json!("object")) {
                object
                    .entry("additionalProperties")
                    .or_insert(Value::Bool(false));
            }
            if let Some(Value::String(description)) = object.get_mut("description") {
                *description = description.split_whitespace().collect::<Vec<_>>().join(" ");
            }
        }
        transform_subschemas(self, schema);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generated() -> Map<String, Value> {
        definitions(&overlay()).expect("the fleet schemas generate")
    }

    #[test]
    fn the_overlay_refines_only_fields_the_types_have() {
        let mut misspelt = overlay();
        misspelt.push(refine::<RegistrationSpec>(
            "leaseDurationSecond",
            json!({"minimum": 1}),
        ));
        assert_eq!(
            definitions(&misspelt).unwrap_err(),
            SchemaError::UnknownField {
                field: "RegistrationSpec.leaseDurationSecond".into()
            }
        );

        let mut foreign = overlay();
        foreign.push(refine::<crate::api::fleet::FleetSyncSpec>(
            "repo",
            json!({"minLength": 1}),
        ));
        assert_eq!(
            definitions(&foreign).unwrap_err(),
            SchemaError::UnknownType {
                type_name: "FleetSyncSpec".into()
            }
        );

        // Nor can it add a field below one: a field exists because a type has it.
        let mut nested = overlay();
        nested.push(refine::<HubSpec>(
            "registration",
            json!({"properties": {"colour": {"type": "string"}}}),
        ));
        assert_eq!(
            definitions(&nested).unwrap_err(),
            SchemaError::NewSubschema {
                field: "HubSpec.registration".into(),
                keyword: "properties".into()
            }
        );
    }

    #[test]
    fn the_overlay_cannot_say_otherwise_than_the_types() {
        let mut other_default = overlay();
        other_default.push(refine::<RegistrationSpec>(
            "leaseDurationSeconds",
            json!({"default": 30}),
        ));
        assert_eq!(
            definitions(&other_default).unwrap_err(),
            SchemaError::Conflict {
                field: "RegistrationSpec.leaseDurationSeconds".into(),
                keyword: "default".into(),
                generated: json!(60),
                overlay: json!(30)
            }
        );

        let mut other_type = overlay();
        other_type.push(refine::<AddOnSpec>(
            "installNamespace",
            json!({"type": "integer"}),
        ));
        assert!(matches!(
            definitions(&other_type).unwrap_err(),
            SchemaError::Conflict { keyword, .. } if keyword == "type"
        ));

        // Saying again what the type says is harmless.
        let mut repeated = overlay();
        repeated.push(refine::<RegistrationSpec>(
            "leaseDurationSeconds",
            json!({"default": 60}),
        ));
        assert_eq!(definitions(&repeated), Ok(generated()));
    }

    #[test]
    fn an_integer_field_without_bounds_fails_generation() {
        let unbounded: Vec<Refinement> = overlay()
            .into_iter()
            .filter(|refinement| refinement.field != "backoffLimit")
            .collect();
        assert_eq!(
            definitions(&unbounded).unwrap_err(),
            SchemaError::UnboundedInteger {
                field: "AvailabilitySpec.backoffLimit".into()
            }
        );
    }

    #[test]
    fn a_field_without_an_example_fails_generation() {
        let without: Vec<Refinement> = overlay()
            .into_iter()
            .filter(|refinement| refinement.field != "hubRef")
            .collect();
        assert_eq!(
            definitions(&without).unwrap_err(),
            SchemaError::NoExample {
                field: "SpokeSpec.hubRef".into()
            }
        );
    }

    /// An example is a value its field accepts, so the reference never shows one that fails.
    #[test]
    fn every_example_is_valid() {
        let mut checked = 0;
        for kind in Kind::ALL {
            let root = schema(kind).unwrap();
            let mut pending = vec![root.clone()];
            while let Some(node) = pending.pop() {
                let Value::Object(map) = &node else { continue };
                if let Some(Value::Array(examples)) = map.get("examples") {
                    let mut standalone = node.clone();
                    standalone["$defs"] = root["$defs"].clone();
                    standalone.as_object_mut().unwrap().remove("examples");
                    let validator = jsonschema::draft202012::new(&standalone).unwrap();
                    for example in examples {
                        assert!(
                            validator.is_valid(example),
                            "{kind}: {example} fails {node}"
                        );
                        checked += 1;
                    }
                }
                for value in map.values() {
                    match value {
                        Value::Object(_) => pending.push(value.clone()),
                        Value::Array(items) => pending.extend(items.iter().cloned()),
                        _ => {}
                    }
                }
            }
        }
        assert!(checked >= 50, "only {checked} examples found");
    }

    /// A default is valid for its field, and an object's default (its type's `Default`) is what
    /// serde fills each of its fields with: `Default` impls and serde's defaults agree.
    #[test]
    fn every_default_is_valid_and_object_defaults_are_their_fields_defaults() {
        let definitions = generated();
        let mut checked = 0;
        for (type_name, definition) in &definitions {
            let fields = definition.get("properties").and_then(Value::as_object);
            for (field, schema) in fields.into_iter().flatten() {
                let Some(default) = schema.get("default") else {
                    continue;
                };
                let mut standalone = schema.clone();
                standalone["$defs"] = Value::Object(definitions.clone());
                let validator = jsonschema::draft202012::new(&standalone).unwrap();
                assert!(
                    validator.is_valid(default),
                    "{type_name}.{field}: default {default} is invalid"
                );
                checked += 1;
                let Some(Value::Object(default)) = schema.get("default") else {
                    continue;
                };
                let target = schema["$ref"]
                    .as_str()
                    .unwrap()
                    .strip_prefix(DEFINITIONS)
                    .unwrap();
                let field_defaults: Map<String, Value> = definitions[target]["properties"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .filter_map(|(name, field)| Some((name.clone(), field.get("default")?.clone())))
                    .collect();
                assert_eq!(
                    default, &field_defaults,
                    "{type_name}.{field}: the default of {target} differs from its fields' defaults"
                );
            }
        }
        assert!(checked >= 10, "only {checked} defaults found");
    }
}

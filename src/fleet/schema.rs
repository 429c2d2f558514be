//! The JSON Schemas of the fleet repo format, generated from its types ([`generate`]), and
//! schema validation whose errors say what is wrong in a user's words.

mod generate;

use std::sync::OnceLock;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use super::Kind;
use super::diagnostic::{Diagnostic, DocumentOrigin};
use super::names::{closest, did_you_mean};
use super::yaml::escape_pointer_token;
pub use generate::file_name;

/// The JSON Schema of a kind's documents, as validation uses it.
pub fn schema(kind: Kind) -> &'static Value {
    &compiled(kind).schema
}

/// The JSON Schema of a kind as published in `schemas/` (its [`file_name`] there).
pub fn schema_json(kind: Kind) -> String {
    let mut text = serde_json::to_string_pretty(schema(kind)).unwrap_or_default();
    text.push('\n');
    text
}

struct CompiledSchema {
    schema: Value,
    validator: Validator,
}

fn compiled(kind: Kind) -> &'static CompiledSchema {
    static SCHEMAS: [OnceLock<CompiledSchema>; 3] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = match kind {
        Kind::Hub => &SCHEMAS[0],
        Kind::Spoke => &SCHEMAS[1],
        Kind::AddOn => &SCHEMAS[2],
    };
    slot.get_or_init(|| {
        // The schemas depend on the types and the overlay alone, and tests generate them: failing
        // here is a build defect.
        let schema = generate::schema(kind).unwrap_or_else(|err| panic!("fleet schema: {err}"));
        let validator = jsonschema::draft202012::new(&schema).expect("fleet schema compiles");
        CompiledSchema { schema, validator }
    })
}

/// Every schema violation of one document.
pub fn validate(kind: Kind, document: &Value, origin: &DocumentOrigin) -> Vec<Diagnostic> {
    let compiled = compiled(kind);
    // Most documents are valid, and checking that is much cheaper than collecting errors.
    if compiled.validator.is_valid(document) {
        return Vec::new();
    }
    let errors: Vec<_> = compiled.validator.iter_errors(document).collect();
    // A misspelt required field shows up twice: as unknown and as missing. Report it once, as
    // the unknown field with its suggestion.
    let misspelt: Vec<(String, String)> = errors
        .iter()
        .filter_map(|error| match error.kind() {
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let pointer = error.instance_path().as_str();
                let known = known_fields(&compiled.schema, pointer);
                Some(unexpected.iter().filter_map(move |field| {
                    closest(field, known.iter().copied())
                        .map(|intended| (pointer.to_string(), format!("{intended:?}")))
                }))
            }
            _ => None,
        })
        .flatten()
        .collect();
    let mut diagnostics = Vec::new();
    for error in &errors {
        if let ValidationErrorKind::Required { property } = error.kind()
            && misspelt.contains(&(
                error.instance_path().as_str().to_string(),
                property.to_string(),
            ))
        {
            continue;
        }
        describe(&compiled.schema, error, origin, &mut diagnostics);
    }
    diagnostics
}

/// The fields the schema knows at an instance pointer.
fn known_fields<'s>(schema: &'s Value, pointer: &str) -> Vec<&'s str> {
    schema_node(schema, pointer)
        .and_then(|node| node.get("properties"))
        .and_then(Value::as_object)
        .map(|properties| properties.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

fn describe(
    schema: &Value,
    error: &ValidationError<'_>,
    origin: &DocumentOrigin,
    out: &mut Vec<Diagnostic>,
) {
    let pointer = error.instance_path().as_str();
    let node = schema_node(schema, pointer);
    let message = match error.kind() {
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let known = known_fields(schema, pointer);
            for field in unexpected {
                let field_pointer = format!("{pointer}/{}", escape_pointer_token(field));
                let hint = did_you_mean(field, known.iter().copied());
                let known_list = if hint.is_empty() && !known.is_empty() {
                    format!(" (known fields: {})", known.join(", "))
                } else {
                    String::new()
                };
                out.push(origin.at_key(
                    &field_pointer,
                    format!("unknown field {field:?}{hint}{known_list}"),
                ));
            }
            return;
        }
        ValidationErrorKind::Required { property } => {
            // Said of the missing field itself, as kube-apiserver does ("metadata.name:
            // Required value"); it has no place of its own, so it is shown where its mapping is.
            let field = property.as_str().unwrap_or_default();
            out.push(origin.at(
                &format!("{pointer}/{}", escape_pointer_token(field)),
                format!("{field} is required"),
            ));
            return;
        }
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(single) => single.to_string(),
                TypeKind::Multiple(set) => set
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            let got = describe_value(error.instance());
            match required(node) {
                // An empty `metadata:` or `spec:` is missing what it must hold.
                Some(fields) if error.instance().is_null() => {
                    let verb = if fields.contains(", ") { "are" } else { "is" };
                    format!("expected {expected}, got {got}; {fields} {verb} required")
                }
                _ => format!("expected {expected}, got {got}"),
            }
        }
        ValidationErrorKind::Constant { expected_value } => {
            format!(
                "must be {expected_value}, got {}",
                describe_value(error.instance())
            )
        }
        ValidationErrorKind::Enum { options } => {
            format!(
                "must be one of {}, got {}",
                list(options),
                describe_value(error.instance())
            )
        }
        ValidationErrorKind::Minimum { .. } | ValidationErrorKind::Maximum { .. } => {
            let bound = |key| node.and_then(|node| node.get(key)).map(Value::to_string);
            match (bound("minimum"), bound("maximum")) {
                (Some(min), Some(max)) => {
                    format!("must be between {min} and {max}, got {}", error.instance())
                }
                _ => error.to_string(),
            }
        }
        ValidationErrorKind::MinLength { limit: 1 } => "must not be empty".to_string(),
        ValidationErrorKind::Pattern { pattern } => {
            format!(
                "{} does not match {pattern}",
                describe_value(error.instance())
            )
        }
        _ => error.to_string(),
    };
    out.push(origin.at(pointer, message));
}

/// The fields a schema node requires, as "a, b", if any.
fn required(node: Option<&Value>) -> Option<String> {
    let fields: Vec<&str> = node?
        .get("required")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    (!fields.is_empty()).then(|| fields.join(", "))
}

fn describe_value(value: &Value) -> String {
    let kind = match value {
        Value::Null => return "null".to_string(),
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => return "a list".to_string(),
        Value::Object(_) => return "a mapping".to_string(),
    };
    format!("{kind} {value}")
}

fn list(options: &Value) -> String {
    match options.as_array() {
        Some(items) => items
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        None => options.to_string(),
    }
}

/// The subschema that applies to the instance at `pointer`, following `properties`, `items` and
/// local `$ref`s. Used to find the known fields and bounds of a node.
fn schema_node<'s>(schema: &'s Value, pointer: &str) -> Option<&'s Value> {
    let mut node = resolve_ref(schema, schema)?;
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        let next = if token.parse::<usize>().is_ok() && node.get("items").is_some() {
            node.get("items")
        } else {
            node.get("properties")
                .and_then(|properties| properties.get(&token))
        }?;
        node = resolve_ref(schema, next)?;
    }
    Some(node)
}

fn resolve_ref<'s>(root: &'s Value, node: &'s Value) -> Option<&'s Value> {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) => root.pointer(reference.strip_prefix('#')?),
        None => Some(node),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use super::*;

    fn repo_path(path: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
    }

    /// Fails when `schemas/` differs from what the types generate. To regenerate:
    /// `FLEETFORM_BLESS=1 cargo test --lib schemas_are_current`.
    #[test]
    fn schemas_are_current() {
        let dir = repo_path("schemas");
        let bless = std::env::var_os("FLEETFORM_BLESS").is_some();
        let mut problems = Vec::new();
        for kind in Kind::ALL {
            let (name, generated) = (file_name(kind), schema_json(kind));
            if bless {
                std::fs::write(dir.join(&name), &generated).unwrap();
            }
            match std::fs::read_to_string(dir.join(&name)) {
                Ok(found) if found == generated => {}
                Ok(_) => problems.push(format!("{name} is out of date")),
                Err(_) => problems.push(format!("{name} is missing")),
            }
        }
        let generated: BTreeSet<String> = Kind::ALL.into_iter().map(file_name).collect();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if !generated.contains(&name) {
                problems.push(format!("{name} is not a schema fleetform generates"));
            }
        }
        assert!(
            problems.is_empty(),
            "schemas/ differs from the fleet types:\n  {}\nregenerate with \
             `FLEETFORM_BLESS=1 cargo test --lib schemas_are_current`",
            problems.join("\n  ")
        );
    }

    #[test]
    fn embedded_schemas_compile_as_draft_2020_12() {
        for kind in Kind::ALL {
            let compiled = compiled(kind);
            assert_eq!(
                compiled.schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
                "{kind:?}"
            );
            assert_eq!(
                compiled.schema["properties"]["kind"]["const"],
                kind.as_str()
            );
        }
    }

    #[test]
    fn schema_nodes_follow_refs_and_items() {
        let schema = schema(Kind::Spoke);
        let node = schema_node(schema, "/spec/kubeconfig/secretRef").unwrap();
        assert!(node["properties"].get("key").is_some());
        let node = schema_node(schema, "/spec/addons/0").unwrap();
        assert!(node["properties"].get("installNamespace").is_some());
    }
}

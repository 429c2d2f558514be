//! The Go field order of built-in types, read once from `go_fields.txt`.

use std::collections::HashMap;
use std::sync::LazyLock;

/// How a field's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Child {
    /// A scalar, or maps and lists of scalars: written sorted.
    Plain,
    /// A struct of this type.
    Struct(u32),
    /// A list of structs of this type.
    List(u32),
    /// A map whose values are structs of this type.
    Map(u32),
    /// An embedded object (`runtime.RawExtension`): ordered by its own apiVersion and kind.
    Embedded,
}

/// One struct type: its JSON fields in Go order.
#[derive(Debug, Default)]
pub struct Shape {
    pub fields: Vec<(Box<str>, Child)>,
    /// The field names sorted, to tell fields the type does not declare.
    sorted: Vec<Box<str>>,
}

impl Shape {
    /// Whether the type declares `field`.
    pub fn declares(&self, field: &str) -> bool {
        self.sorted
            .binary_search_by(|name| (**name).cmp(field))
            .is_ok()
    }
}

/// Every type of the table, and the types objects of each apiVersion and kind are.
#[derive(Debug, Default)]
pub struct Types {
    pub shapes: Vec<Shape>,
    /// apiVersion → type name → shape.
    by_version: HashMap<String, HashMap<String, u32>>,
}

const META: &str = "meta.k8s.io/v1";

impl Types {
    /// The type of an object of `api_version` and `kind`: the group's own, or for the core
    /// version and objects without one (Status, discovery documents), the meta type.
    pub fn of(&self, api_version: &str, kind: &str) -> Option<u32> {
        let own = self
            .by_version
            .get(api_version)
            .and_then(|types| types.get(kind));
        match own {
            Some(id) => Some(*id),
            None if api_version.is_empty() || api_version == "v1" => self
                .by_version
                .get(META)
                .and_then(|types| types.get(kind))
                .copied(),
            None => None,
        }
    }

    /// Reads the table; references to types it does not define are left plain, and every
    /// other line that cannot be read is reported.
    pub fn parse(text: &str) -> (Types, Vec<String>) {
        let mut problems = Vec::new();
        // First pass: every type's id, so that fields may name types defined later.
        let mut section = String::new();
        let mut types = Types::default();
        let mut lines = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = name.to_string();
                continue;
            }
            let Some(name) = line.split(' ').next() else {
                continue;
            };
            let id = u32::try_from(types.shapes.len()).unwrap_or(u32::MAX);
            types.shapes.push(Shape::default());
            types
                .by_version
                .entry(section.clone())
                .or_default()
                .insert(name.to_string(), id);
            lines.push((section.clone(), id, line));
        }
        for (section, id, line) in lines {
            let mut fields: Vec<(Box<str>, Child)> = Vec::new();
            for field in line.split(' ').skip(1) {
                let (name, child) = match field.split_once(':') {
                    None => (field, Child::Plain),
                    Some((name, "*")) => (name, Child::Embedded),
                    Some((name, target)) => {
                        let (wrap, inner): (fn(u32) -> Child, &str) = if let Some(t) =
                            target.strip_prefix('[').and_then(|t| t.strip_suffix(']'))
                        {
                            (Child::List, t)
                        } else if let Some(t) =
                            target.strip_prefix('{').and_then(|t| t.strip_suffix('}'))
                        {
                            (Child::Map, t)
                        } else {
                            (Child::Struct, target)
                        };
                        let (version, type_name) = match inner.rsplit_once('.') {
                            Some((version, type_name)) => (version, type_name),
                            None => (section.as_str(), inner),
                        };
                        match types.by_version.get(version).and_then(|t| t.get(type_name)) {
                            Some(target) => (name, wrap(*target)),
                            None => {
                                problems.push(format!("{line}: no type {inner}"));
                                (name, Child::Plain)
                            }
                        }
                    }
                };
                fields.push((Box::from(name), child));
            }
            let mut sorted: Vec<Box<str>> = fields.iter().map(|(n, _)| n.clone()).collect();
            sorted.sort();
            if let Some(shape) = types.shapes.get_mut(id as usize) {
                *shape = Shape { fields, sorted };
            }
        }
        (types, problems)
    }
}

/// The table every answer and stored object is written with.
pub static TYPES: LazyLock<Types> = LazyLock::new(|| Types::parse(include_str!("go_fields.txt")).0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_reads_whole_and_every_reference_resolves() {
        let (types, problems) = Types::parse(include_str!("go_fields.txt"));
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(types.shapes.len() > 500);
    }

    #[test]
    fn objects_find_their_type_by_api_version_and_kind() {
        let t = &*TYPES;
        let names = |id: u32| -> Vec<&str> {
            t.shapes[id as usize]
                .fields
                .iter()
                .map(|(n, _)| &**n)
                .collect()
        };
        let cm = t.of("v1", "ConfigMap").unwrap();
        assert_eq!(
            names(cm),
            [
                "kind",
                "apiVersion",
                "metadata",
                "immutable",
                "data",
                "binaryData"
            ]
        );
        let status = t.of("v1", "Status").unwrap();
        assert_eq!(
            names(status),
            [
                "kind",
                "apiVersion",
                "metadata",
                "status",
                "message",
                "reason",
                "details",
                "code"
            ]
        );
        assert!(t.of("apps/v1", "Deployment").is_some());
        assert!(t.of("", "APIVersions").is_some());
        assert!(t.of("example.com/v1", "Widget").is_none());
        assert!(t.of("example.com/v1", "Status").is_none());
    }
}

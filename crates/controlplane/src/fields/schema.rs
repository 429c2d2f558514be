//! The shape of objects as kube-apiserver's field manager and JSON decoder see them:
//! structured-merge-diff's type model (scalars; structs, atomic or not, with the fields they
//! declare; lists that are atomic, sets, or maps keyed by some of their items' fields; maps
//! merged by key or atomic) plus, for built-in kinds, how their Go types encode each field
//! (what an object decoded from `{}` holds, what is omitted when empty).
//!
//! Built-in kinds come from `builtin.types`, generated from Kubernetes' own sources by
//! `tools/builtin_types.py`; a custom resource's type is made from its CRD version's
//! structural schema ([`Schema::from_crd`]) as kube-openapi's schemaconv makes it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, OnceLock};

use serde_json::{Map, Value};

/// An index into a [`Schema`]'s types.
pub type TypeId = usize;

/// A scalar type. `Any` accepts every scalar (quantities, times, int-or-string).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    String,
    Number,
    Boolean,
    Any,
}

/// How a list's items relate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced as a whole.
    Atomic,
    /// Scalar items merged as a set.
    Set,
    /// Object items merged by these key fields.
    Map(Vec<String>),
}

/// When a decoded field is left out of the encoded object (Go's json tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Omit {
    /// Always written.
    Never,
    /// `omitempty` on a scalar, slice or map: left out when empty or null.
    Empty,
    /// `omitempty` on a pointer: left out when null.
    Nil,
    /// `omitzero`: left out when equal to its zero value.
    Zero,
}

/// One declared field of a struct.
#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    pub ty: TypeId,
    /// What an object decoded from `{}` holds here (`{}` stands for the struct's own zero);
    /// None: absent.
    pub zero: Option<Value>,
    pub omit: Omit,
    /// The value a keyed list's item has for this key field when it omits it.
    pub key_default: Option<Value>,
    /// Where the Go type declares the field: its JSON encoding writes fields in this order.
    pub order: usize,
}

/// A struct or map: declared fields, and the type of undeclared keys (None: undeclared keys
/// are refused).
#[derive(Debug, Clone, Default)]
pub struct MapType {
    /// Sorted by name.
    pub fields: Vec<Field>,
    pub elem: Option<TypeId>,
    pub atomic: bool,
}

impl MapType {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields
            .binary_search_by(|f| f.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.fields[i])
    }

    /// The type of the value at `key`: the declared field's, or undeclared keys'.
    pub fn type_of(&self, key: &str) -> Option<TypeId> {
        self.field(key).map(|f| f.ty).or(self.elem)
    }
}

#[derive(Debug, Clone)]
pub struct ListType {
    pub elem: TypeId,
    pub kind: ListKind,
}

/// What a value of a type may be; a type may allow several forms (an untyped value is a
/// scalar, a list or a map).
#[derive(Debug, Clone, Default)]
pub struct Atom {
    pub scalar: Option<Scalar>,
    pub list: Option<ListType>,
    pub map: Option<MapType>,
}

/// A set of types. Types are referred to by index; named types also by name.
#[derive(Debug, Default)]
pub struct Schema {
    atoms: Vec<Atom>,
    names: HashMap<String, TypeId>,
    /// `group/version` and kind → the kind's type (built-in kinds).
    kinds: HashMap<(String, String), TypeId>,
    zeros: OnceLock<Vec<OnceLock<Value>>>,
}

/// The type of one kind's objects.
#[derive(Debug, Clone)]
pub struct ObjectType {
    pub schema: Arc<Schema>,
    pub root: TypeId,
}

impl ObjectType {
    /// A built-in kind's type (`group/version` as in apiVersion).
    pub fn builtin(api_version: &str, kind: &str) -> Option<ObjectType> {
        let schema = BUILTIN.clone();
        let root = *schema
            .kinds
            .get(&(api_version.to_string(), kind.to_string()))?;
        Some(ObjectType { schema, root })
    }

    /// A named built-in type (`io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta`).
    pub fn builtin_named(name: &str) -> Option<ObjectType> {
        let schema = BUILTIN.clone();
        let root = schema.named(name)?;
        Some(ObjectType { schema, root })
    }

    /// What the Go type decodes `{}` into: the object the field manager compares a created
    /// object with.
    pub fn zero(&self) -> Value {
        self.schema.zero(self.root)
    }
}

static BUILTIN: LazyLock<Arc<Schema>> = LazyLock::new(|| {
    Arc::new(
        Schema::parse(include_str!("builtin.types"))
            .unwrap_or_else(|e| panic!("builtin.types is malformed: {e}")),
    )
});

/// The type ObjectMeta has in every object.
pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

const ANY: &str = "atomic-any";
/// The type of any JSON value, its maps merged by key (what kube deduces of untyped objects).
pub const DEDUCED: &str = "deduced";

impl Schema {
    pub fn atom(&self, id: TypeId) -> &Atom {
        &self.atoms[id]
    }

    pub fn named(&self, name: &str) -> Option<TypeId> {
        self.names.get(name).copied()
    }

    fn add(&mut self, atom: Atom) -> TypeId {
        self.atoms.push(atom);
        self.atoms.len() - 1
    }

    /// The id of a named type, reserving it if it is not defined yet.
    fn name(&mut self, name: &str) -> TypeId {
        if let Some(id) = self.names.get(name) {
            return *id;
        }
        let id = self.add(Atom::default());
        self.names.insert(name.to_string(), id);
        id
    }

    /// Adds the two untyped types every schema has: any JSON value replaced as a whole, and
    /// any JSON value whose maps merge by key.
    fn add_untyped(&mut self) {
        let any = self.name(ANY);
        let deduced = self.name(DEDUCED);
        self.atoms[any] = Atom {
            scalar: Some(Scalar::Any),
            list: Some(ListType {
                elem: any,
                kind: ListKind::Atomic,
            }),
            map: Some(MapType {
                elem: Some(any),
                atomic: true,
                ..MapType::default()
            }),
        };
        self.atoms[deduced] = Atom {
            scalar: Some(Scalar::Any),
            list: Some(ListType {
                elem: any,
                kind: ListKind::Atomic,
            }),
            map: Some(MapType {
                elem: Some(deduced),
                ..MapType::default()
            }),
        };
    }

    /// The type any JSON value has, maps merged by key.
    pub fn deduced(&self) -> TypeId {
        self.names[DEDUCED]
    }

    /// Reads the `builtin.types` format (see its header).
    pub fn parse(text: &str) -> Result<Schema, String> {
        let mut s = Schema::default();
        s.add_untyped();
        let mut current: Option<(TypeId, MapType)> = None;
        for (n, line) in text.lines().enumerate() {
            let err = |m: &str| format!("line {}: {m}: {line:?}", n + 1);
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if let Some(field) = line.strip_prefix("  ") {
                let (_, map) = current
                    .as_mut()
                    .ok_or_else(|| err("field outside a struct"))?;
                let mut words = field.split(' ');
                let name = words.next().ok_or_else(|| err("no field name"))?;
                let ty = s.parse_expr(words.next().ok_or_else(|| err("no type"))?)?;
                let mut f = Field {
                    name: name.to_string(),
                    ty,
                    zero: None,
                    omit: Omit::Never,
                    key_default: None,
                    order: map.fields.len(),
                };
                for word in words {
                    match word {
                        "omit" => f.omit = Omit::Empty,
                        "omitnil" => f.omit = Omit::Nil,
                        "omitzero" => f.omit = Omit::Zero,
                        z if z.starts_with('=') => {
                            f.zero = Some(serde_json::from_str(&z[1..]).map_err(|_| err("zero"))?)
                        }
                        d if d.starts_with("default=") => {
                            f.key_default = Some(
                                serde_json::from_str(&d["default=".len()..])
                                    .map_err(|_| err("default"))?,
                            )
                        }
                        _ => return Err(err("unknown word")),
                    }
                }
                map.fields.push(f);
                continue;
            }
            if let Some((id, map)) = current.take() {
                s.finish_struct(id, map);
            }
            let words: Vec<&str> = line.split(' ').collect();
            match words.as_slice() {
                ["kind", api_version, kind, ty] => {
                    let api_version = api_version.strip_prefix('/').unwrap_or(api_version);
                    let id = s.name(ty);
                    s.kinds
                        .insert((api_version.to_string(), kind.to_string()), id);
                }
                ["scalar", name] => {
                    let id = s.name(name);
                    s.atoms[id].scalar = Some(Scalar::Any);
                }
                ["deduced", name] => {
                    let id = s.name(name);
                    let deduced = s.deduced();
                    s.atoms[id] = s.atoms[deduced].clone();
                }
                ["struct", name, rest @ ..] => {
                    let id = s.name(name);
                    let mut map = MapType::default();
                    let mut rest = rest.iter();
                    while let Some(word) = rest.next() {
                        match *word {
                            "atomic" => map.atomic = true,
                            "open" => {
                                let expr = rest.next().ok_or_else(|| err("open what"))?;
                                map.elem = Some(s.parse_expr(expr)?);
                            }
                            _ => return Err(err("unknown word")),
                        }
                    }
                    current = Some((id, map));
                }
                _ => return Err(err("unknown line")),
            }
        }
        if let Some((id, map)) = current.take() {
            s.finish_struct(id, map);
        }
        for (name, id) in &s.names {
            let a = &s.atoms[*id];
            if a.scalar.is_none() && a.list.is_none() && a.map.is_none() {
                return Err(format!("type {name} is used but never defined"));
            }
        }
        Ok(s)
    }

    fn finish_struct(&mut self, id: TypeId, mut map: MapType) {
        map.fields.sort_by(|a, b| a.name.cmp(&b.name));
        self.atoms[id].map = Some(map);
    }

    /// A type expression: `string`, `[map:k]T`, `{atomic}T`, a name...
    fn parse_expr(&mut self, expr: &str) -> Result<TypeId, String> {
        if let Some(rest) = expr.strip_prefix('[') {
            let (kind, elem) = rest
                .split_once(']')
                .ok_or_else(|| format!("unclosed list in {expr:?}"))?;
            let kind = match kind {
                "atomic" => ListKind::Atomic,
                "set" => ListKind::Set,
                k => match k.strip_prefix("map:") {
                    Some(keys) => ListKind::Map(keys.split(',').map(str::to_string).collect()),
                    None => return Err(format!("unknown list kind in {expr:?}")),
                },
            };
            let elem = self.parse_expr(elem)?;
            return Ok(self.add(Atom {
                list: Some(ListType { elem, kind }),
                ..Atom::default()
            }));
        }
        if let Some(rest) = expr.strip_prefix('{') {
            let (kind, elem) = rest
                .split_once('}')
                .ok_or_else(|| format!("unclosed map in {expr:?}"))?;
            let elem = self.parse_expr(elem)?;
            return Ok(self.add(Atom {
                map: Some(MapType {
                    elem: Some(elem),
                    atomic: kind == "atomic",
                    ..MapType::default()
                }),
                ..Atom::default()
            }));
        }
        let scalar = match expr {
            "string" => Scalar::String,
            "number" => Scalar::Number,
            "boolean" => Scalar::Boolean,
            "any" => Scalar::Any,
            name => return Ok(self.name(name)),
        };
        Ok(self.add(Atom {
            scalar: Some(scalar),
            ..Atom::default()
        }))
    }

    /// What a struct's Go type decodes `{}` into; `null` for other types.
    pub fn zero(&self, id: TypeId) -> Value {
        let zeros = self
            .zeros
            .get_or_init(|| (0..self.atoms.len()).map(|_| OnceLock::new()).collect());
        zeros[id]
            .get_or_init(|| {
                let Some(map) = &self.atoms[id].map else {
                    return Value::Null;
                };
                let mut out = Map::new();
                for f in &map.fields {
                    match &f.zero {
                        Some(Value::Object(o)) if o.is_empty() => {
                            out.insert(f.name.clone(), self.zero(f.ty));
                        }
                        Some(z) => {
                            out.insert(f.name.clone(), z.clone());
                        }
                        None => {}
                    }
                }
                Value::Object(out)
            })
            .clone()
    }

    /// A custom resource's type for one CRD version's `openAPIV3Schema` (None: no schema),
    /// with `spec.preserveUnknownFields` as `preserve`: the root gets `apiVersion`, `kind`
    /// and ObjectMeta's `metadata`, as kube-apiserver's OpenAPI builder adds them.
    pub fn from_crd(schema: Option<&Value>, preserve: bool) -> ObjectType {
        let mut s = Schema::default();
        s.add_untyped();
        let meta = s.import(&BUILTIN, OBJECT_META);
        let string = s.add(Atom {
            scalar: Some(Scalar::String),
            ..Atom::default()
        });
        let root = match schema {
            Some(schema) => {
                let root = s.add_openapi(schema, preserve);
                if let Some(map) = s.atoms[root].map.as_mut() {
                    for (name, ty) in [("apiVersion", string), ("kind", string), ("metadata", meta)]
                    {
                        add_field(map, name, ty);
                    }
                }
                root
            }
            // No schema: any object (kube-apiserver gives such a root no properties).
            None => s.add(Atom {
                map: Some(MapType {
                    elem: Some(s.deduced()),
                    ..MapType::default()
                }),
                ..Atom::default()
            }),
        };
        ObjectType {
            schema: Arc::new(s),
            root,
        }
    }

    /// Copies a named type of `from` (and every type it refers to) into this schema.
    fn import(&mut self, from: &Schema, name: &str) -> TypeId {
        let mut copied: HashMap<TypeId, TypeId> = HashMap::new();
        let id = from.names[name];
        self.copy(from, id, &mut copied)
    }

    fn copy(&mut self, from: &Schema, id: TypeId, copied: &mut HashMap<TypeId, TypeId>) -> TypeId {
        if let Some(mine) = copied.get(&id) {
            return *mine;
        }
        let mine = match from.names.iter().find(|(_, v)| **v == id) {
            Some((name, _)) => self.name(name),
            None => self.add(Atom::default()),
        };
        copied.insert(id, mine);
        let atom = from.atoms[id].clone();
        let list = atom.list.map(|l| ListType {
            elem: self.copy(from, l.elem, copied),
            kind: l.kind,
        });
        let map = atom.map.map(|m| MapType {
            fields: m
                .fields
                .into_iter()
                .map(|f| Field {
                    ty: self.copy(from, f.ty, copied),
                    ..f
                })
                .collect(),
            elem: m.elem.map(|e| self.copy(from, e, copied)),
            atomic: m.atomic,
        });
        self.atoms[mine] = Atom {
            scalar: atom.scalar,
            list,
            map,
        };
        mine
    }

    /// One structural schema node, as kube-openapi's schemaconv types it; `preserve` (once
    /// set by `x-kubernetes-preserve-unknown-fields` it holds for every node below) lets
    /// objects keep undeclared fields.
    fn add_openapi(&mut self, node: &Value, preserve: bool) -> TypeId {
        let preserve = preserve
            || node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
        let int_or_string = node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
        let ty = node.get("type").and_then(Value::as_str).unwrap_or("");
        if int_or_string {
            return self.add(Atom {
                scalar: Some(Scalar::Any),
                ..Atom::default()
            });
        }
        let atom = match ty {
            "object" => Atom {
                map: Some(self.object(node, preserve)),
                ..Atom::default()
            },
            "array" => Atom {
                list: Some(self.list(node, preserve)),
                ..Atom::default()
            },
            "integer" | "number" => scalar_atom(Scalar::Number),
            "boolean" => scalar_atom(Scalar::Boolean),
            "string" => match node.get("format").and_then(Value::as_str).unwrap_or("") {
                "" | "byte" => scalar_atom(Scalar::String),
                _ => scalar_atom(Scalar::Any),
            },
            _ => Atom {
                scalar: Some(Scalar::Any),
                list: Some(self.list(node, preserve)),
                map: Some(self.object(node, preserve)),
            },
        };
        self.add(atom)
    }

    fn object(&mut self, node: &Value, preserve: bool) -> MapType {
        let mut fields = Vec::new();
        let properties = node.get("properties").and_then(Value::as_object);
        for (name, sub) in properties.into_iter().flatten() {
            let ty = self.add_openapi(sub, preserve);
            fields.push(Field {
                name: name.clone(),
                ty,
                zero: None,
                omit: Omit::Never,
                key_default: sub.get("default").cloned(),
                order: 0,
            });
        }
        let embedded = node.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
        if embedded {
            let string = self.add(scalar_atom(Scalar::String));
            let meta = self.names[OBJECT_META];
            let mut map = MapType {
                fields,
                ..MapType::default()
            };
            for (name, ty) in [("apiVersion", string), ("kind", string), ("metadata", meta)] {
                add_field(&mut map, name, ty);
            }
            fields = map.fields;
        }
        fields.sort_by(|a, b| a.name.cmp(&b.name));
        let elem = match node.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(self.deduced()),
            Some(sub @ Value::Object(_)) => Some(self.add_openapi(sub, preserve)),
            Some(_) => None,
            None if preserve || fields.is_empty() => Some(self.deduced()),
            None => None,
        };
        MapType {
            fields,
            elem,
            atomic: node.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"),
        }
    }

    fn list(&mut self, node: &Value, preserve: bool) -> ListType {
        let kind = match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => ListKind::Map(
                node.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|k| k.as_str().map(str::to_string))
                    .collect(),
            ),
            _ => ListKind::Atomic,
        };
        let elem = match node.get("items") {
            Some(items @ Value::Object(_)) => self.add_openapi(items, preserve),
            _ => self.names[ANY],
        };
        ListType { elem, kind }
    }
}

fn scalar_atom(s: Scalar) -> Atom {
    Atom {
        scalar: Some(s),
        ..Atom::default()
    }
}

/// Declares a field unless the schema already does.
fn add_field(map: &mut MapType, name: &str, ty: TypeId) {
    if map.field(name).is_none() {
        map.fields.push(Field {
            name: name.into(),
            ty,
            zero: None,
            omit: Omit::Never,
            key_default: None,
            order: map.fields.len(),
        });
        map.fields.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn builtin(api_version: &str, kind: &str) -> ObjectType {
        ObjectType::builtin(api_version, kind)
            .unwrap_or_else(|| panic!("{api_version} {kind} has no type"))
    }

    fn field_type<'a>(t: &'a ObjectType, path: &[&str]) -> &'a Atom {
        let mut id = t.root;
        for name in path {
            if let Some(list) = &t.schema.atom(id).list {
                id = list.elem;
            }
            let map = t.schema.atom(id).map.as_ref().expect("a struct");
            id = map
                .type_of(name)
                .unwrap_or_else(|| panic!("no field {name}"));
        }
        t.schema.atom(id)
    }

    #[test]
    fn builtin_types_know_kube_s_atomic_structs_and_list_keys() {
        let event = builtin("v1", "Event");
        let involved = field_type(&event, &["involvedObject"]);
        assert!(involved.map.as_ref().unwrap().atomic, "ObjectReference");
        let events = builtin("events.k8s.io/v1", "Event");
        let regarding = field_type(&events, &["regarding"]);
        assert!(regarding.map.as_ref().unwrap().atomic);
        let deployment = builtin("apps/v1", "Deployment");
        let containers = field_type(&deployment, &["spec", "template", "spec", "containers"]);
        assert_eq!(
            containers.list.as_ref().unwrap().kind,
            ListKind::Map(vec!["name".into()])
        );
        let ports = field_type(
            &deployment,
            &["spec", "template", "spec", "containers", "ports"],
        );
        assert_eq!(
            ports.list.as_ref().unwrap().kind,
            ListKind::Map(vec!["containerPort".into(), "protocol".into()])
        );
        let finalizers = field_type(&deployment, &["metadata", "finalizers"]);
        assert_eq!(finalizers.list.as_ref().unwrap().kind, ListKind::Set);
        let selector = field_type(&deployment, &["spec", "selector"]);
        assert!(selector.map.as_ref().unwrap().atomic, "LabelSelector");
        let crd = builtin("apiextensions.k8s.io/v1", "CustomResourceDefinition");
        let versions = field_type(&crd, &["spec", "versions"]);
        assert_eq!(versions.list.as_ref().unwrap().kind, ListKind::Atomic);
        let conditions = field_type(&crd, &["status", "conditions"]);
        assert_eq!(
            conditions.list.as_ref().unwrap().kind,
            ListKind::Map(vec!["type".into()])
        );
    }

    #[test]
    fn zero_objects_hold_what_go_decodes_from_an_empty_object() {
        assert_eq!(
            builtin("v1", "Event").zero(),
            json!({"eventTime": null, "firstTimestamp": null, "involvedObject": {},
                "lastTimestamp": null, "metadata": {}, "reportingComponent": "",
                "reportingInstance": "", "source": {}})
        );
        let crd = builtin("apiextensions.k8s.io/v1", "CustomResourceDefinition").zero();
        assert_eq!(
            crd["status"],
            json!({"acceptedNames": {"kind": "", "plural": ""}, "conditions": null,
                "storedVersions": null})
        );
        assert_eq!(crd["spec"]["versions"], Value::Null);
    }

    #[test]
    fn crd_schemas_type_their_objects_as_schemaconv_does() {
        let t = Schema::from_crd(
            Some(&json!({"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "size": {"x-kubernetes-int-or-string": true}}}}})),
            false,
        );
        let spec = field_type(&t, &["spec"]).map.as_ref().unwrap();
        assert!(spec.elem.is_none(), "undeclared spec fields are refused");
        let free_a = field_type(&t, &["spec", "free", "a"]).map.as_ref().unwrap();
        assert!(free_a.elem.is_some(), "preserve-unknown-fields holds below");
        assert!(
            field_type(&t, &["spec", "labels"])
                .map
                .as_ref()
                .unwrap()
                .elem
                .is_some()
        );
        assert_eq!(field_type(&t, &["spec", "size"]).scalar, Some(Scalar::Any));
        assert!(field_type(&t, &["metadata", "labels"]).map.is_some());
        assert_eq!(
            field_type(&t, &["spec", "ports"])
                .list
                .as_ref()
                .unwrap()
                .kind,
            ListKind::Map(vec!["name".into()])
        );
    }
}

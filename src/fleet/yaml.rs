//! YAML to JSON with positions.
//!
//! Every node of a fleet repo document keeps the line and column it came from, so that schema and
//! semantic errors can point at the exact place in the file. This module turns a YAML stream into
//! JSON values plus an index from JSON pointer to position, and refuses what could hurt: duplicate
//! keys, nesting deeper than [`MAX_DEPTH`], alias expansion beyond [`MAX_NODES`] nodes, non-scalar
//! mapping keys and tags it does not understand. Scalars resolve as in YAML 1.2's core schema.

use std::collections::{HashMap, hash_map::Entry};
use std::fmt;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, Tag};
use serde_json::{Map, Number, Value};

/// Deepest nesting of mappings and sequences a document may have.
pub const MAX_DEPTH: usize = 64;
/// Most nodes one document may expand to, aliases included (guards against alias bombs).
pub const MAX_NODES: usize = 100_000;

/// A place in a file: 1-based line and column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl Position {
    /// The start of a file, for errors that concern a whole file.
    pub const START: Position = Position { line: 1, column: 1 };

    fn from_marker(marker: &Marker) -> Self {
        Position {
            line: marker.line().max(1),
            column: marker.col() + 1,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// Why a YAML stream could not be read, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlError {
    pub position: Position,
    pub message: String,
}

impl YamlError {
    fn at(position: Position, message: impl Into<String>) -> Self {
        YamlError {
            position,
            message: message.into(),
        }
    }
}

/// Positions of the nodes of one document, by JSON pointer.
#[derive(Clone, Debug, Default)]
pub struct SpanIndex {
    values: HashMap<String, Position>,
    keys: HashMap<String, Position>,
}

impl SpanIndex {
    /// Where the value at `pointer` starts; for a pointer that names no node (a missing field,
    /// or a node inside an alias), the nearest enclosing node.
    pub fn value(&self, pointer: &str) -> Position {
        let mut pointer = pointer;
        loop {
            if let Some(position) = self.values.get(pointer) {
                return *position;
            }
            match pointer.rfind('/') {
                Some(cut) => pointer = &pointer[..cut],
                None => return Position::START,
            }
        }
    }

    /// Where the key of the mapping entry at `pointer` is written, falling back to its value.
    pub fn key(&self, pointer: &str) -> Position {
        self.keys
            .get(pointer)
            .copied()
            .unwrap_or_else(|| self.value(pointer))
    }
}

/// One document of a YAML stream.
#[derive(Clone, Debug)]
pub struct YamlDocument {
    pub value: Value,
    pub spans: SpanIndex,
    /// Where the document's root node starts.
    pub start: Position,
}

/// Escapes one JSON pointer reference token (RFC 6901).
pub fn escape_pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Parses every document of a YAML stream, recording where each node is. Empty documents are
/// kept as `null`.
pub fn parse_documents(text: &str) -> Result<Vec<YamlDocument>, YamlError> {
    parse(text, true)
}

/// Parses every document of a YAML stream without recording positions (their `spans` are
/// empty and their `start` is not meaningful): several times faster, for the common case where nothing needs pointing at. Errors
/// are as precise as [`parse_documents`]'s.
pub fn parse_documents_unindexed(text: &str) -> Result<Vec<YamlDocument>, YamlError> {
    // Errors are rare: find them fast, then describe them with positions.
    parse(text, false).or_else(|_| parse(text, true))
}

fn parse(text: &str, track: bool) -> Result<Vec<YamlDocument>, YamlError> {
    let mut builder = Builder {
        track,
        ..Builder::default()
    };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|err| {
            YamlError::at(Position::from_marker(err.marker()), err.info().to_string())
        })?;
        builder.on_event(event, Position::from_marker(&span.start))?;
    }
    Ok(builder.documents)
}

enum Frame {
    Sequence {
        pointer: String,
        anchor: usize,
        items: Vec<Value>,
        nodes: usize,
    },
    Mapping {
        pointer: String,
        anchor: usize,
        entries: Map<String, Value>,
        key_positions: HashMap<String, Position>,
        pending_key: Option<String>,
        nodes: usize,
    },
}

/// A finished node: its value and how many nodes it holds (itself included).
struct Node {
    value: Value,
    nodes: usize,
}

#[derive(Default)]
struct Builder {
    /// Record positions (and JSON pointers) of nodes; without it only values are built.
    track: bool,
    documents: Vec<YamlDocument>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Value, usize)>,
    spans: SpanIndex,
    root: Option<(Value, Position)>,
    doc_start: Position,
    nodes: usize,
}

impl Builder {
    fn on_event(&mut self, event: Event<'_>, at: Position) -> Result<(), YamlError> {
        match event {
            Event::Nothing | Event::StreamStart | Event::StreamEnd => Ok(()),
            Event::DocumentStart(_) => {
                self.anchors.clear();
                self.spans = SpanIndex::default();
                self.root = None;
                self.doc_start = at;
                self.nodes = 0;
                Ok(())
            }
            Event::DocumentEnd => {
                let (value, start) = self.root.take().unwrap_or((Value::Null, self.doc_start));
                self.documents.push(YamlDocument {
                    value,
                    spans: std::mem::take(&mut self.spans),
                    start,
                });
                Ok(())
            }
            Event::Alias(id) => {
                if self.expects_key() {
                    return Err(YamlError::at(
                        at,
                        "mapping keys must be plain strings, not aliases",
                    ));
                }
                let Some((value, nodes)) = self.anchors.get(&id).cloned() else {
                    return Err(YamlError::at(at, "alias refers to an unknown anchor"));
                };
                self.count(at, nodes)?;
                self.finish_node(Node { value, nodes }, 0, at, None)
            }
            Event::Scalar(text, style, anchor, tag) => {
                if self.expects_key() {
                    return self.set_key(text.into_owned(), at);
                }
                self.count(at, 1)?;
                let value = resolve_scalar(&text, style, tag.as_deref(), at)?;
                self.finish_node(Node { value, nodes: 1 }, anchor, at, None)
            }
            Event::SequenceStart(anchor, _) => {
                self.open(at)?;
                let pointer = self.child_pointer();
                self.record(&pointer, at);
                self.stack.push(Frame::Sequence {
                    pointer,
                    anchor,
                    items: Vec::new(),
                    nodes: 1,
                });
                Ok(())
            }
            Event::MappingStart(anchor, _) => {
                self.open(at)?;
                let pointer = self.child_pointer();
                self.record(&pointer, at);
                self.stack.push(Frame::Mapping {
                    pointer,
                    anchor,
                    entries: Map::new(),
                    key_positions: HashMap::new(),
                    pending_key: None,
                    nodes: 1,
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, anchor, nodes, pointer) = match self.stack.pop() {
                    Some(Frame::Sequence {
                        items,
                        anchor,
                        nodes,
                        pointer,
                    }) => (Value::Array(items), anchor, nodes, pointer),
                    Some(Frame::Mapping {
                        entries,
                        anchor,
                        nodes,
                        pointer,
                        ..
                    }) => (Value::Object(entries), anchor, nodes, pointer),
                    None => return Err(YamlError::at(at, "unbalanced end of collection")),
                };
                let start = if self.track {
                    self.spans.value(&pointer)
                } else {
                    Position::START
                };
                self.finish_node(Node { value, nodes }, anchor, start, Some(pointer))
            }
        }
    }

    fn record(&mut self, pointer: &str, at: Position) {
        if self.track {
            self.spans.values.insert(pointer.to_string(), at);
        }
    }

    /// Opening a collection: it may not be a mapping key, and may not nest too deep.
    fn open(&mut self, at: Position) -> Result<(), YamlError> {
        if self.expects_key() {
            return Err(YamlError::at(
                at,
                "mapping keys must be plain strings, not mappings or sequences",
            ));
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(YamlError::at(
                at,
                format!("nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.count(at, 1)
    }

    fn count(&mut self, at: Position, nodes: usize) -> Result<(), YamlError> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > MAX_NODES {
            return Err(YamlError::at(
                at,
                format!(
                    "document expands to more than {MAX_NODES} nodes (aliases referring to aliases?)"
                ),
            ));
        }
        Ok(())
    }

    fn expects_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame::Mapping {
                pending_key: None,
                ..
            })
        )
    }

    fn set_key(&mut self, key: String, at: Position) -> Result<(), YamlError> {
        let Some(Frame::Mapping {
            pointer,
            entries,
            key_positions,
            pending_key,
            ..
        }) = self.stack.last_mut()
        else {
            return Ok(());
        };
        if !self.track {
            // The caller parses again with positions to say where the first one was.
            if entries.contains_key(&key) {
                return Err(YamlError::at(at, format!("duplicate key {key:?}")));
            }
            *pending_key = Some(key);
            return Ok(());
        }
        match key_positions.entry(key.clone()) {
            Entry::Occupied(first) => {
                return Err(YamlError::at(
                    at,
                    format!("duplicate key {key:?} (first at line {})", first.get().line),
                ));
            }
            Entry::Vacant(slot) => {
                slot.insert(at);
            }
        }
        let entry_pointer = format!("{pointer}/{}", escape_pointer_token(&key));
        self.spans.keys.insert(entry_pointer, at);
        *pending_key = Some(key);
        Ok(())
    }

    /// The pointer of the node about to start: below the innermost open collection (empty when
    /// positions are not tracked).
    fn child_pointer(&self) -> String {
        if !self.track {
            return String::new();
        }
        match self.stack.last() {
            None => String::new(),
            Some(Frame::Sequence { pointer, items, .. }) => format!("{pointer}/{}", items.len()),
            Some(Frame::Mapping {
                pointer,
                pending_key,
                ..
            }) => format!(
                "{pointer}/{}",
                escape_pointer_token(pending_key.as_deref().unwrap_or_default())
            ),
        }
    }

    fn finish_node(
        &mut self,
        node: Node,
        anchor: usize,
        at: Position,
        pointer: Option<String>,
    ) -> Result<(), YamlError> {
        if self.track {
            let pointer = pointer.unwrap_or_else(|| self.child_pointer());
            self.spans.values.entry(pointer).or_insert(at);
        }
        if anchor != 0 {
            self.anchors
                .insert(anchor, (node.value.clone(), node.nodes));
        }
        match self.stack.last_mut() {
            None => {
                self.root = Some((node.value, at));
            }
            Some(Frame::Sequence { items, nodes, .. }) => {
                items.push(node.value);
                *nodes += node.nodes;
            }
            Some(Frame::Mapping {
                entries,
                pending_key,
                nodes,
                ..
            }) => {
                let key = pending_key.take().unwrap_or_default();
                entries.insert(key, node.value);
                *nodes += node.nodes;
            }
        }
        Ok(())
    }
}

fn resolve_scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    at: Position,
) -> Result<Value, YamlError> {
    if let Some(tag) = tag {
        if !tag.is_yaml_core_schema() {
            return Err(YamlError::at(
                at,
                format!("unsupported tag {}{}", tag.handle, tag.suffix),
            ));
        }
        let resolved = match tag.suffix.as_str() {
            "str" => Some(Value::String(text.to_string())),
            "null" => resolve_null(text),
            "bool" => resolve_bool(text),
            "int" => resolve_int(text),
            "float" => resolve_float(text).or_else(|| resolve_int(text)),
            other => {
                return Err(YamlError::at(at, format!("unsupported tag !!{other}")));
            }
        };
        return resolved
            .ok_or_else(|| YamlError::at(at, format!("{text:?} is not a valid !!{}", tag.suffix)));
    }
    if style != ScalarStyle::Plain {
        return Ok(Value::String(text.to_string()));
    }
    Ok(resolve_null(text)
        .or_else(|| resolve_bool(text))
        .or_else(|| resolve_int(text))
        .or_else(|| resolve_float(text))
        .unwrap_or_else(|| Value::String(text.to_string())))
}

fn resolve_null(text: &str) -> Option<Value> {
    matches!(text, "" | "~" | "null" | "Null" | "NULL").then_some(Value::Null)
}

fn resolve_bool(text: &str) -> Option<Value> {
    match text {
        "true" | "True" | "TRUE" => Some(Value::Bool(true)),
        "false" | "False" | "FALSE" => Some(Value::Bool(false)),
        _ => None,
    }
}

fn resolve_int(text: &str) -> Option<Value> {
    let (digits, radix) = if let Some(octal) = text.strip_prefix("0o") {
        (octal, 8)
    } else if let Some(hex) = text.strip_prefix("0x") {
        (hex, 16)
    } else {
        let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
        if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        return text
            .parse::<i64>()
            .ok()
            .map(Value::from)
            .or_else(|| text.parse::<f64>().ok().and_then(float_value));
    };
    if digits.is_empty() {
        return None;
    }
    i64::from_str_radix(digits, radix).ok().map(Value::from)
}

fn resolve_float(text: &str) -> Option<Value> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(cut) => (&unsigned[..cut], Some(&unsigned[cut + 1..])),
        None => (unsigned, None),
    };
    let mut parts = mantissa.splitn(2, '.');
    let whole = parts.next().unwrap_or_default();
    let fraction = parts.next();
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(whole)
        && fraction.is_none_or(digits)
        && (!whole.is_empty() || fraction.is_some_and(|f| !f.is_empty()));
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    if !mantissa_ok || !exponent_ok {
        return None;
    }
    text.parse::<f64>().ok().and_then(float_value)
}

fn float_value(f: f64) -> Option<Value> {
    Number::from_f64(f).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(text: &str) -> YamlDocument {
        let mut docs = parse_documents(text).expect("valid yaml");
        assert_eq!(docs.len(), 1);
        docs.remove(0)
    }

    #[test]
    fn scalars_resolve_as_yaml_core_schema() {
        let doc = one(
            "a: 1\nb: -2\nc: 1.5\nd: true\ne: ~\nf: '1'\ng: 0x1f\nh: yes\ni: 1e3\nj: .5\nk: \"\"\nl: !!str 7\n",
        );
        assert_eq!(
            doc.value,
            json!({"a": 1, "b": -2, "c": 1.5, "d": true, "e": null, "f": "1", "g": 31,
                   "h": "yes", "i": 1000.0, "j": 0.5, "k": "", "l": "7"})
        );
    }

    #[test]
    fn positions_point_at_values_and_keys() {
        let doc = one("spec:\n  hubRef: main\n  addons:\n    - a\n    - name: b\n");
        assert_eq!(
            doc.spans.value("/spec/hubRef"),
            Position {
                line: 2,
                column: 11
            }
        );
        assert_eq!(
            doc.spans.key("/spec/hubRef"),
            Position { line: 2, column: 3 }
        );
        assert_eq!(
            doc.spans.value("/spec/addons/1/name"),
            Position {
                line: 5,
                column: 13
            }
        );
        // A missing field is located at its nearest parent.
        assert_eq!(
            doc.spans.value("/spec/addons/1/installNamespace"),
            Position { line: 5, column: 7 }
        );
    }

    #[test]
    fn multi_document_streams_keep_each_document() {
        let docs = parse_documents("a: 1\n---\nb: 2\n---\n").expect("valid");
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[1].value, json!({"b": 2}));
        assert_eq!(docs[1].start.line, 3);
        assert_eq!(docs[2].value, Value::Null);
    }

    #[test]
    fn duplicate_keys_are_refused_where_repeated() {
        let err = parse_documents("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(err.position, Position { line: 3, column: 1 });
        assert_eq!(err.message, "duplicate key \"a\" (first at line 1)");
    }

    #[test]
    fn aliases_expand_and_alias_bombs_are_refused() {
        let doc = one("base: &b {x: 1}\ncopy: *b\n");
        assert_eq!(doc.value["copy"], json!({"x": 1}));

        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
            ));
        }
        let err = parse_documents(&bomb).unwrap_err();
        assert!(
            err.message.contains("more than 100000 nodes"),
            "{}",
            err.message
        );
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        let err = parse_documents(&text).unwrap_err();
        assert_eq!(err.message, "nesting deeper than 64 levels");
    }

    #[test]
    fn non_scalar_keys_and_unknown_tags_are_refused() {
        assert!(
            parse_documents("? [a]\n: 1\n")
                .unwrap_err()
                .message
                .contains("mapping keys")
        );
        assert!(
            parse_documents("a: !custom x\n")
                .unwrap_err()
                .message
                .contains("unsupported tag")
        );
    }

    #[test]
    fn unindexed_parsing_gives_the_same_values_and_the_same_errors() {
        let text = "a: &x [1, {b: 2}]\nc: *x\n---\nd: ~\n";
        let indexed: Vec<Value> = parse_documents(text)
            .unwrap()
            .into_iter()
            .map(|d| d.value)
            .collect();
        let fast: Vec<Value> = parse_documents_unindexed(text)
            .unwrap()
            .into_iter()
            .map(|d| d.value)
            .collect();
        assert_eq!(indexed, fast);
        for broken in ["a: 1\na: 2\n", "a: [1\n", "a: !x 1\n"] {
            assert_eq!(
                parse_documents(broken).unwrap_err(),
                parse_documents_unindexed(broken).unwrap_err()
            );
        }
    }

    #[test]
    fn unindexed_parsing_succeeds_on_its_own() {
        let text = "---\nkind: Spoke\nmetadata:\n  name: a\n  labels:\n    env: prod\nspec:\n  kubeconfig:\n    secretRef: {namespace: ns, name: a, key: kubeconfig}\n  addons: [x, y]\n---\nkind: Spoke\n";
        let documents = parse(text, false).expect("the fast path parses valid YAML by itself");
        assert_eq!(documents.len(), 2);
        assert!(documents[0].spans.values.is_empty());
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let err = parse_documents("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.position.line >= 2, "{err:?}");
    }
}

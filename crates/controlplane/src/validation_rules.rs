//! `x-kubernetes-validations`: the CEL rules of a CRD version's schema, compiled once when the
//! CRD is written (a rule that does not compile refuses the CRD) and evaluated on every write
//! of its objects, with errors worded as kube-apiserver words them.
//!
//! Rules see `self` (the value at their schema node) and, in transition rules, `oldSelf` (the
//! same value before an update, correlated through object properties and map-list keys; such
//! rules are skipped on create unless `optionalOldSelf`). `message`, `messageExpression`,
//! `reason` and `fieldPath` shape the error as kube-apiserver's.
//!
//! Expressions run on the `cel` crate (cel-rust) with the Kubernetes CEL libraries from
//! `kube-cel`; [`FUNCTIONS`] lists every function a rule may call. Cost is bounded before a
//! rule runs (cel-rust counts no steps): see [`estimated_cost`], [`PER_CALL_LIMIT`] and
//! [`PER_OBJECT_BUDGET`].

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, mpsc};

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use kube_cel::cel::objects::{Key, Map, OptionalValue};
use kube_cel::cel::{Context, Program, Value as Cel};
use serde_json::Value;

use crate::error::FieldError;

/// Every function a rule may call: CEL's standard ones and the Kubernetes libraries
/// (strings, lists, sets, regex, URLs, quantities, format, math). Anything else refuses the
/// CRD, as kube-apiserver's type check does.
pub const FUNCTIONS: &[&str] = &[
    // CEL standard library.
    "contains",
    "size",
    "max",
    "min",
    "startsWith",
    "endsWith",
    "matches",
    "string",
    "bytes",
    "double",
    "int",
    "uint",
    "duration",
    "timestamp",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    "optional.none",
    "optional.of",
    "value",
    "hasValue",
    "or",
    "orValue",
    // Kubernetes strings library.
    "charAt",
    "indexOf",
    "lastIndexOf",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "join",
    "reverse",
    "strings.quote",
    "format",
    // Kubernetes lists and sets libraries.
    "isSorted",
    "sum",
    "slice",
    "sort",
    "flatten",
    "distinct",
    "first",
    "last",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    // Kubernetes regex library.
    "find",
    "findAll",
    // Kubernetes URL library.
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    // Kubernetes quantity library.
    "quantity",
    "isQuantity",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "sign",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    // CEL math extension.
    "math.ceil",
    "math.floor",
    "math.round",
    "math.trunc",
    "math.abs",
    "math.sign",
    "math.isInf",
    "math.isNaN",
    "math.isFinite",
    "math.bitAnd",
    "math.bitOr",
    "math.bitXor",
    "math.bitNot",
    "math.bitShiftLeft",
    "math.bitShiftRight",
    "math.sqrt",
    "math.greatest",
    "math.least",
];

/// The most one rule evaluation may cost (kube-apiserver's per-call limit).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// The most all rule evaluations of one write may cost together (kube-apiserver's runtime
/// budget per object).
pub const PER_OBJECT_BUDGET: u64 = 10_000_000;
/// kube-apiserver's limit on an evaluated messageExpression.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;
/// The longest rule or messageExpression accepted, and the deepest nesting of brackets in it:
/// cel-rust's parser and interpreter recurse once per level, and a stack overflow would end
/// the process.
const MAX_EXPRESSION_BYTES: usize = 4096;
const MAX_NESTING: usize = 32;
/// The stack of the thread rules are compiled and run on: room for the largest expression
/// allowed above (reserved, not committed, memory).
const STACK_BYTES: usize = 256 << 20;

thread_local! {
    /// The functions rules may call, registered once on the CEL thread (a CEL context is not
    /// `Sync`).
    static ROOT: Context<'static> = Context::default().with_all();
}

type Job = Box<dyn FnOnce() + Send>;

/// Runs CEL work on the CEL thread (one, with [`STACK_BYTES`] of stack, started on first use)
/// and waits for it; None if the thread cannot start or the work panicked (cel-rust's parser
/// can, on some malformed input; the thread survives it).
fn on_cel_stack<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    static WORKER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    let worker = WORKER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("cel".into())
                .stack_size(STACK_BYTES)
                .spawn(move || {
                    for job in rx {
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                })
                .ok()?;
            Some(tx)
        })
        .as_ref()?;
    let (reply, answer) = mpsc::sync_channel(1);
    worker
        .send(Box::new(move || {
            let _ = reply.send(work());
        }))
        .ok()?;
    answer.recv().ok()
}

/// The compiled rules of one schema, laid out as the schema is.
#[derive(Debug, Default)]
pub struct RuleSet {
    /// The schema's `type`, which errors print as the invalid value (`"object"`).
    type_name: String,
    rules: Vec<Rule>,
    properties: BTreeMap<String, RuleSet>,
    additional: Option<Box<RuleSet>>,
    items: Option<Box<RuleSet>>,
    all_of: Vec<RuleSet>,
    /// `x-kubernetes-list-map-keys` of a map list: how old items are found for `oldSelf`.
    map_keys: Option<Vec<String>>,
}

#[derive(Debug)]
struct Rule {
    source: String,
    program: Program,
    message: Option<String>,
    message_expression: Option<Program>,
    reason: Option<String>,
    /// `fieldPath` as a dotted suffix (`.executor` → `executor`).
    field_path: Option<String>,
    uses_old_self: bool,
    optional_old_self: bool,
    shape: Shape,
}

/// What bounds a program's work: its size, how deeply its comprehensions nest, how often it
/// multiplies a string's length (`replace`), and whether it turns strings into lists.
#[derive(Debug, Clone, Copy)]
struct Shape {
    nodes: u64,
    depth: u32,
    replaces: u32,
    splits: bool,
}

/// Why a CRD's rules do not compile: the field (as kube-apiserver names it) and the sentence.
#[derive(Debug, PartialEq)]
pub struct CompileError {
    pub field: String,
    pub message: String,
}

impl RuleSet {
    /// Compiles every `x-kubernetes-validations` rule under `schema`; None when there are
    /// none. `at` names the schema in errors, e.g.
    /// `spec.versions[0].schema.openAPIV3Schema`.
    pub fn compile(schema: &Value, at: &str) -> Result<Option<Arc<RuleSet>>, Vec<CompileError>> {
        let (schema, place) = (schema.clone(), at.to_string());
        let (set, errors) = on_cel_stack(move || {
            let mut errors = Vec::new();
            let set = compile_node(&schema, &place, &mut errors);
            (set, errors)
        })
        .unwrap_or_else(|| {
            let failed = CompileError {
                field: at.to_string(),
                message: "Internal error: compiling its x-kubernetes-validations failed".into(),
            };
            (RuleSet::default(), vec![failed])
        });
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(set.has_rules().then(|| Arc::new(set)))
    }

    fn has_rules(&self) -> bool {
        !self.rules.is_empty()
            || self.properties.values().any(RuleSet::has_rules)
            || self.additional.as_deref().is_some_and(RuleSet::has_rules)
            || self.items.as_deref().is_some_and(RuleSet::has_rules)
            || self.all_of.iter().any(RuleSet::has_rules)
    }

    /// Evaluates every rule against a custom resource (after pruning and defaulting); `old` is
    /// the stored object on update. Returns every field error.
    pub fn validate(self: &Arc<Self>, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut run = Run {
            errs: Vec::new(),
            budget: PER_OBJECT_BUDGET,
            stopped: false,
        };
        let obj = resource_root(obj);
        let old = old.map(resource_root);
        let rules = self.clone();
        on_cel_stack(move || {
            run.node(&rules, "", &obj, old.as_ref());
            run.errs
        })
        .unwrap_or_else(|| {
            vec![FieldError::invalid(
                "",
                &Value::Null,
                "internal error evaluating x-kubernetes-validations rules",
            )]
        })
    }
}

/// What rules at a resource's root see: apiVersion, kind, metadata.name and generateName
/// and the rest of the object (kube-apiserver hides the rest of metadata from them).
fn resource_root(obj: &Value) -> Value {
    let mut root = obj.clone();
    if let Some(meta) = root.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| k == "name" || k == "generateName");
    }
    root
}

fn compile_node(schema: &Value, at: &str, errors: &mut Vec<CompileError>) -> RuleSet {
    let mut set = RuleSet {
        type_name: schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("object")
            .to_string(),
        ..Default::default()
    };
    for (i, r) in schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        match compile_rule(r, schema, &format!("{at}.x-kubernetes-validations[{i}]")) {
            Ok(rule) => set.rules.push(rule),
            Err(e) => errors.push(e),
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, s) in props {
            let child = compile_node(s, &format!("{at}.properties[{k}]"), errors);
            if child.has_rules() {
                set.properties.insert(k.clone(), child);
            }
        }
    }
    if let Some(s) = schema.get("additionalProperties").filter(|s| s.is_object()) {
        let child = compile_node(s, &format!("{at}.additionalProperties"), errors);
        set.additional = child.has_rules().then(|| Box::new(child));
    }
    if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
        let child = compile_node(s, &format!("{at}.items"), errors);
        set.items = child.has_rules().then(|| Box::new(child));
    }
    for (i, s) in schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let child = compile_node(s, &format!("{at}.allOf[{i}]"), errors);
        if child.has_rules() {
            set.all_of.push(child);
        }
    }
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
        set.map_keys = schema
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|k| {
                k.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            });
    }
    set
}

/// A rule as kube-apiserver prints it in errors: its internal Go struct as JSON.
fn rule_value(r: &Value) -> String {
    let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
    let optional = |v: Option<&Value>| match v {
        Some(Value::String(s)) => go_json(s),
        Some(Value::Bool(b)) => b.to_string(),
        _ => "null".into(),
    };
    format!(
        "{{\"Rule\":{},\"Message\":{},\"MessageExpression\":{},\"Reason\":{},\"FieldPath\":{},\"OptionalOldSelf\":{}}}",
        go_json(text("rule")),
        go_json(text("message")),
        go_json(text("messageExpression")),
        optional(r.get("reason")),
        go_json(text("fieldPath")),
        optional(r.get("optionalOldSelf")),
    )
}

/// A JSON string as Go's encoder writes it (`<`, `>` and `&` escaped).
fn go_json(s: &str) -> String {
    Value::String(s.to_string())
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

fn compile_rule(r: &Value, schema: &Value, at: &str) -> Result<Rule, CompileError> {
    let text = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
    let source = text("rule").unwrap_or_default();
    let fail = |field: &str, what: &str, why: String| CompileError {
        field: format!("{at}.{field}"),
        message: format!(
            "Invalid value: {}: {what}compilation failed: {why}",
            rule_value(r)
        ),
    };
    if source.trim().is_empty() {
        return Err(CompileError {
            field: format!("{at}.rule"),
            message: "Required value".into(),
        });
    }
    let program = compile_expression(&source)
        .and_then(|p| check_fields(p.expression(), schema, &source).map(|()| p))
        .map_err(|why| fail("rule", "", why))?;
    let message_expression = match text("messageExpression") {
        Some(m) => Some(
            compile_expression(&m)
                .map_err(|why| fail("messageExpression", "messageExpression ", why))?,
        ),
        None => None,
    };
    let reason = text("reason");
    if let Some(reason) = &reason
        && !matches!(
            reason.as_str(),
            "FieldValueInvalid"
                | "FieldValueForbidden"
                | "FieldValueRequired"
                | "FieldValueDuplicate"
        )
    {
        return Err(CompileError {
            field: format!("{at}.reason"),
            message: format!(
                "Unsupported value: {}: supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
                crate::error::render_value(&Value::String(reason.clone()))
            ),
        });
    }
    let field_path = text("fieldPath").map(|p| {
        p.trim_start_matches('.')
            .replace("['", ".")
            .replace("']", "")
    });
    let uses_old_self = references_old_self(program.expression());
    Ok(Rule {
        shape: shape(program.expression()),
        message: text("message"),
        message_expression,
        reason,
        field_path,
        uses_old_self,
        optional_old_self: r.get("optionalOldSelf").and_then(Value::as_bool) == Some(true),
        program,
        source,
    })
}

/// Parses an expression and checks that it names only `self`, `oldSelf`, the variables its
/// macros bind and the functions of [`FUNCTIONS`].
fn compile_expression(source: &str) -> Result<Program, String> {
    check_size(source)?;
    // cel-go indents the snippet lines under each error by a space.
    let program = Program::compile(source).map_err(|e| e.to_string().replace("\n| ", "\n | "))?;
    let mut scope = vec!["self".to_string(), "oldSelf".to_string()];
    check_references(program.expression(), &mut scope)?;
    Ok(program)
}

/// Refuses expressions longer than [`MAX_EXPRESSION_BYTES`] or nested deeper than
/// [`MAX_NESTING`] brackets (outside string literals).
fn check_size(source: &str) -> Result<(), String> {
    if source.len() > MAX_EXPRESSION_BYTES {
        return Err(format!(
            "ERROR: <input>: expression of {} bytes is longer than the {MAX_EXPRESSION_BYTES} allowed",
            source.len()
        ));
    }
    let (mut depth, mut quote, mut escaped) = (0usize, None, false);
    for c in source.chars() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' | '[' | '{' => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err(format!(
                            "ERROR: <input>: expression nests deeper than {MAX_NESTING} levels"
                        ));
                    }
                }
                ')' | ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
    }
    Ok(())
}

/// Refuses selecting, from `self`, a field its schema does not declare (an object with
/// properties that keeps no unknown fields), as cel-go's type checker does.
fn check_fields(e: &IdedExpr, self_schema: &Value, source: &str) -> Result<(), String> {
    let mut found = None;
    visit_selects(e, self_schema, &mut found);
    match found {
        None => Ok(()),
        Some(field) => {
            let needle = format!(".{field}");
            let at = source
                .match_indices(&needle)
                .find(|(i, _)| {
                    let after = source[i + needle.len()..].chars().next();
                    !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
                .map_or(0, |(i, _)| i);
            let line = source.lines().next().unwrap_or("");
            Err(format!(
                "ERROR: <input>:1:{}: undefined field '{field}'\n | {line}\n | {}^",
                at + 1,
                ".".repeat(at)
            ))
        }
    }
}

/// The schema a selection chain rooted at `self` reaches, noting in `found` the first field
/// selected that its object does not declare.
fn visit_selects<'s>(
    e: &IdedExpr,
    self_schema: &'s Value,
    found: &mut Option<String>,
) -> Option<&'s Value> {
    match &e.expr {
        Expr::Ident(name) if name == "self" => Some(self_schema),
        Expr::Select(s) => {
            let parent = visit_selects(&s.operand, self_schema, found)?;
            let declared = parent.get("properties").and_then(Value::as_object);
            let open = parent.get("additionalProperties").is_some()
                || parent.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            match declared.and_then(|p| p.get(&s.field)) {
                Some(child) => Some(child),
                None if declared.is_some_and(|d| !d.is_empty()) && !open => {
                    found.get_or_insert_with(|| s.field.clone());
                    None
                }
                None => None,
            }
        }
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                visit_selects(t, self_schema, found);
            }
            for a in &call.args {
                visit_selects(a, self_schema, found);
            }
            None
        }
        Expr::List(l) => {
            for x in &l.elements {
                visit_selects(x, self_schema, found);
            }
            None
        }
        Expr::Comprehension(c) => {
            visit_selects(&c.iter_range, self_schema, found);
            visit_selects(&c.loop_step, self_schema, found);
            visit_selects(&c.result, self_schema, found);
            None
        }
        _ => None,
    }
}

fn undeclared(name: &str) -> String {
    format!("ERROR: <input>: undeclared reference to '{name}' (in container '')")
}

fn check_references(e: &IdedExpr, scope: &mut Vec<String>) -> Result<(), String> {
    match &e.expr {
        Expr::Ident(name) => {
            if !name.starts_with('@') && !scope.iter().any(|s| s == name) {
                return Err(undeclared(name));
            }
        }
        Expr::Call(call) => {
            // `sets.contains(a, b)` parses as a call of `contains` on an identifier `sets`.
            let namespace = match call.target.as_deref().map(|t| &t.expr) {
                Some(Expr::Ident(ns)) if !scope.contains(ns) => Some(ns),
                _ => None,
            };
            let name = match namespace {
                Some(ns) => format!("{ns}.{}", call.func_name),
                None => call.func_name.clone(),
            };
            let operator = name.starts_with(['_', '@', '!', '-']);
            if !operator && !FUNCTIONS.contains(&name.as_str()) {
                return Err(undeclared(&name));
            }
            if let (Some(t), None) = (&call.target, namespace) {
                check_references(t, scope)?;
            }
            for a in &call.args {
                check_references(a, scope)?;
            }
        }
        Expr::Select(s) => check_references(&s.operand, scope)?,
        Expr::List(l) => {
            for x in &l.elements {
                check_references(x, scope)?;
            }
        }
        Expr::Map(m) => {
            for entry in &m.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(me) => {
                        check_references(&me.key, scope)?;
                        check_references(&me.value, scope)?;
                    }
                    EntryExpr::StructField(f) => check_references(&f.value, scope)?,
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    check_references(&f.value, scope)?;
                }
            }
        }
        Expr::Comprehension(c) => {
            check_references(&c.iter_range, scope)?;
            check_references(&c.accu_init, scope)?;
            scope.push(c.iter_var.clone());
            scope.push(c.accu_var.clone());
            let inner = [&c.loop_cond, &c.loop_step, &c.result]
                .into_iter()
                .try_for_each(|x| check_references(x, scope));
            scope.truncate(scope.len() - 2);
            inner?;
        }
        Expr::Literal(_) | Expr::Unspecified => {}
    }
    Ok(())
}

fn references_old_self(e: &IdedExpr) -> bool {
    let mut found = false;
    walk(e, 0, &mut |x, _| {
        found |= matches!(&x.expr, Expr::Ident(n) if n == "oldSelf");
    });
    found
}

/// Visits every node with its comprehension nesting depth.
fn walk(e: &IdedExpr, depth: u32, f: &mut impl FnMut(&IdedExpr, u32)) {
    f(e, depth);
    match &e.expr {
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                walk(t, depth, f);
            }
            for a in &call.args {
                walk(a, depth, f);
            }
        }
        Expr::Select(s) => walk(&s.operand, depth, f),
        Expr::List(l) => l.elements.iter().for_each(|x| walk(x, depth, f)),
        Expr::Map(m) => {
            for entry in &m.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(me) => {
                        walk(&me.key, depth, f);
                        walk(&me.value, depth, f);
                    }
                    EntryExpr::StructField(sf) => walk(&sf.value, depth, f),
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(sf) = &entry.expr {
                    walk(&sf.value, depth, f);
                }
            }
        }
        Expr::Comprehension(c) => {
            walk(&c.iter_range, depth, f);
            walk(&c.accu_init, depth, f);
            for x in [&c.loop_cond, &c.loop_step, &c.result] {
                walk(x, depth + 1, f);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn shape(e: &IdedExpr) -> Shape {
    let mut shape = Shape {
        nodes: 0,
        depth: 0,
        replaces: 0,
        splits: false,
    };
    walk(e, 0, &mut |x, d| {
        shape.nodes += 1;
        shape.depth = shape.depth.max(d);
        if let Expr::Call(c) = &x.expr {
            match c.func_name.as_str() {
                "replace" => shape.replaces += 1,
                "split" | "findAll" => shape.splits = true,
                _ => {}
            }
        }
    });
    shape
}

/// The sizes a rule's work depends on: the longest list or map and the longest string in a
/// value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Extent {
    pub items: u64,
    pub bytes: u64,
}

impl Extent {
    fn of(v: &Value) -> Extent {
        let inner = |children: &mut dyn Iterator<Item = &Value>, len: usize| {
            children.map(Extent::of).fold(
                Extent {
                    items: len as u64,
                    bytes: 0,
                },
                Extent::max,
            )
        };
        match v {
            Value::String(s) => Extent {
                items: 0,
                bytes: s.len() as u64,
            },
            Value::Array(items) => inner(&mut items.iter(), items.len()),
            Value::Object(map) => inner(&mut map.values(), map.len()),
            _ => Extent::default(),
        }
    }

    fn max(self, other: Extent) -> Extent {
        Extent {
            items: self.items.max(other.items),
            bytes: self.bytes.max(other.bytes),
        }
    }
}

/// An upper bound of a rule's work on a value, in kube-apiserver's units (a string costs a
/// tenth of its bytes to go through): the rule's node count, times the longest list or map
/// (plus one) once per nested comprehension, times the longest string's tenth (plus one),
/// times the longest string (plus one) once per `replace`. Rules that split strings into lists
/// count the longest string as a list. A rule without comprehensions over a 1 MiB string
/// costs about 100,000 per node; three comprehensions nested over a 1,000-item list cost about
/// 10⁹ per node and are refused.
pub fn estimated_cost(nodes: u64, depth: u32, replaces: u32, extent: Extent) -> u64 {
    let per_item = extent.items + 1;
    let per_byte = extent.bytes + 1;
    per_item
        .checked_pow(depth)
        .and_then(|c| c.checked_mul(extent.bytes / 10 + 1))
        .and_then(|c| c.checked_mul(per_byte.checked_pow(replaces)?))
        .and_then(|c| c.checked_mul(nodes))
        .unwrap_or(u64::MAX)
}

impl Rule {
    fn cost(&self, extent: Extent) -> u64 {
        let extent = if self.shape.splits {
            Extent {
                items: extent.items.max(extent.bytes),
                ..extent
            }
        } else {
            extent
        };
        estimated_cost(
            self.shape.nodes,
            self.shape.depth,
            self.shape.replaces,
            extent,
        )
    }
}

fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => Cel::Map(Map {
            map: Arc::new(
                map.iter()
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                    .collect(),
            ),
        }),
    }
}

/// One write's evaluation: errors so far and the budget left.
struct Run {
    errs: Vec<FieldError>,
    budget: u64,
    stopped: bool,
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl Run {
    fn node(&mut self, set: &RuleSet, path: &str, v: &Value, old: Option<&Value>) {
        if self.stopped || v.is_null() {
            return;
        }
        if !set.rules.is_empty() {
            self.rules(set, path, v, old);
        }
        for all in &set.all_of {
            self.node(all, path, v, old);
        }
        match v {
            Value::Array(items) => {
                if let Some(item_set) = &set.items {
                    for (i, item) in items.iter().enumerate() {
                        let old_item = set.map_keys.as_ref().and_then(|keys| {
                            old?.as_array()?.iter().find(|o| {
                                keys.iter()
                                    .all(|k| o.get(k.as_str()) == item.get(k.as_str()))
                            })
                        });
                        self.node(item_set, &format!("{path}[{i}]"), item, old_item);
                    }
                }
            }
            Value::Object(map) => {
                for (k, child_value) in map {
                    let old_child = old.and_then(|o| o.get(k.as_str()));
                    if let Some(prop) = set.properties.get(k) {
                        self.node(prop, &child(path, k), child_value, old_child);
                    } else if let Some(additional) = &set.additional {
                        self.node(additional, &format!("{path}[{k}]"), child_value, old_child);
                    }
                }
            }
            _ => {}
        }
    }

    fn invalid(&mut self, path: &str, set: &RuleSet, detail: String) {
        self.errs.push(FieldError::invalid(
            path,
            &Value::String(set.type_name.clone()),
            detail,
        ));
    }

    fn rules(&mut self, set: &RuleSet, path: &str, v: &Value, old: Option<&Value>) {
        let size = old.map_or(Extent::of(v), |o| Extent::of(v).max(Extent::of(o)));
        let this = to_cel(v);
        let before = old.map(to_cel);
        for rule in &set.rules {
            if self.stopped {
                return;
            }
            if rule.uses_old_self && before.is_none() && !rule.optional_old_self {
                continue;
            }
            let said = rule_error_string(rule);
            let cost = rule.cost(size);
            if cost > PER_CALL_LIMIT {
                self.invalid(path, set, format!("'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {said}"));
                self.stopped = true;
                return;
            }
            if cost > self.budget {
                self.invalid(path, set, "validation failed due to running out of cost budget, no further validation rules will be run".into());
                self.stopped = true;
                return;
            }
            self.budget -= cost;
            let old_self = match (&before, rule.optional_old_self) {
                (Some(b), false) => Some(b.clone()),
                (b, true) => Some(Cel::Opaque(Arc::new(match b {
                    Some(b) => OptionalValue::of(b.clone()),
                    None => OptionalValue::none(),
                }))),
                (None, false) => None,
            };
            let outcome = ROOT.with(|root| {
                let mut ctx = root.new_inner_scope();
                ctx.add_variable_from_value("self", this.clone());
                if let Some(o) = &old_self {
                    ctx.add_variable_from_value("oldSelf", o.clone());
                }
                let result = rule.program.execute(&ctx);
                let message = match (&result, &rule.message_expression) {
                    (Ok(Cel::Bool(false)), Some(m)) => evaluated_message(m.execute(&ctx)),
                    _ => None,
                };
                (result, message)
            });
            match outcome {
                (Ok(Cel::Bool(true)), _) => {}
                (Ok(Cel::Bool(false)), message) => {
                    let at = match &rule.field_path {
                        Some(p) => child(path, p),
                        None => path.to_string(),
                    };
                    let detail = message.unwrap_or_else(|| match &rule.message {
                        Some(m) if !m.trim().is_empty() => m.trim().to_string(),
                        _ => format!("failed rule: {said}"),
                    });
                    // kube-apiserver prints a failing scalar, never an object or a list.
                    let shown = match v {
                        Value::Object(_) | Value::Array(_) => None,
                        scalar => Some(scalar),
                    };
                    self.errs.push(match (rule.reason.as_deref(), shown) {
                        (Some("FieldValueForbidden"), _) => FieldError::forbidden(at, &detail),
                        (Some("FieldValueRequired"), _) => FieldError::required(at, &detail),
                        (Some("FieldValueDuplicate"), Some(value)) => {
                            FieldError::duplicate(at, value)
                        }
                        (Some("FieldValueDuplicate"), None) => FieldError {
                            reason: "FieldValueDuplicate",
                            message: format!("{at}: Duplicate value: "),
                            field: at,
                        },
                        (_, Some(value)) => FieldError::invalid(at, value, detail),
                        (_, None) => FieldError {
                            reason: "FieldValueInvalid",
                            message: format!("{at}: Invalid value: {detail}"),
                            field: at,
                        },
                    });
                }
                (Ok(other), _) => self.invalid(
                    path,
                    set,
                    format!("rule did not evaluate to a bool ({other:?}) evaluating rule: {said}"),
                ),
                (Err(e), _) => self.invalid(path, set, format!("{e} evaluating rule: {said}")),
            }
        }
    }
}

/// A messageExpression's result when kube-apiserver would use it: a non-empty single-line
/// string of at most 5 KiB (otherwise the rule's message is used).
fn evaluated_message(result: Result<Cel, kube_cel::cel::ExecutionError>) -> Option<String> {
    match result {
        Ok(Cel::String(s)) => {
            let s = s.trim();
            (!s.is_empty() && !s.contains('\n') && s.len() <= MAX_MESSAGE_BYTES)
                .then(|| s.to_string())
        }
        _ => None,
    }
}

fn rule_error_string(rule: &Rule) -> String {
    match &rule.message {
        Some(m) if !m.trim().is_empty() => m.trim().to_string(),
        _ => rule.source.trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(schema: Value, obj: Value, old: Option<Value>) -> Vec<String> {
        RuleSet::compile(&schema, "s")
            .unwrap()
            .unwrap()
            .validate(&obj, old.as_ref())
            .into_iter()
            .map(|e| e.message)
            .collect()
    }

    fn spec_rule(rule: Value, spec: Value) -> Value {
        let mut props = json!({"a": {"type": "string"}, "n": {"type": "integer"},
            "l": {"type": "array", "items": {"type": "string"}}});
        if let Some(extra) = spec.as_object() {
            for (k, v) in extra {
                props[k] = v.clone();
            }
        }
        json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [rule], "properties": props}}})
    }

    #[test]
    fn kubernetes_library_functions_are_callable() {
        let rules = [
            "self.a.lowerAscii() == 'abc'",
            "self.a.upperAscii().startsWith('AB')",
            "self.a.split('b').size() == 2",
            "self.a.indexOf('c') == 2",
            "self.a.matches('^[a-z]+$')",
            "self.l.isSorted() && self.l.exists(x, x == 'y') && self.l.all(x, x.size() == 1)",
            "self.l.filter(x, x != 'x').map(x, x + '!') == ['y!']",
            "sets.contains(self.l, ['x'])",
            "isURL('https://example.com/a') && url('https://example.com/a').getHost() == 'example.com'",
            "quantity('1Gi').isGreaterThan(quantity('1Mi'))",
            "has(self.a) && !has(self.n)",
            "self.a.find('[bc]+') == 'bc'",
            "math.greatest([1, 5, 3]) == 5",
        ];
        for rule in rules {
            let schema = spec_rule(json!({"rule": rule}), json!({}));
            let m = messages(schema, json!({"spec": {"a": "abc", "l": ["x", "y"]}}), None);
            assert!(m.is_empty(), "{rule}: {m:?}");
        }
    }

    #[test]
    fn a_failing_rule_without_a_message_names_the_rule() {
        let schema = spec_rule(json!({"rule": "self.a == 'x'"}), json!({}));
        assert_eq!(
            messages(schema, json!({"spec": {"a": "y"}}), None),
            ["spec: Invalid value: failed rule: self.a == 'x'"]
        );
    }

    #[test]
    fn evaluation_errors_name_the_rule() {
        let schema = spec_rule(
            json!({"rule": "self.a == 'x'", "message": "a must be x"}),
            json!({}),
        );
        let m = messages(schema, json!({"spec": {"n": 1}}), None);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].starts_with("spec: Invalid value: \"object\": ")
                && m[0].ends_with(" evaluating rule: a must be x"),
            "{m:?}"
        );
    }

    #[test]
    fn transition_rules_run_on_update_only_unless_old_self_is_optional() {
        let schema = spec_rule(
            json!({"rule": "self.n >= oldSelf.n", "message": "n may only grow"}),
            json!({}),
        );
        assert!(messages(schema.clone(), json!({"spec": {"n": 1}}), None).is_empty());
        assert_eq!(
            messages(
                schema,
                json!({"spec": {"n": 1}}),
                Some(json!({"spec": {"n": 2}}))
            ),
            ["spec: Invalid value: n may only grow"]
        );
        let optional = spec_rule(
            json!({"rule": "oldSelf.hasValue() || self.n == 0", "optionalOldSelf": true,
                "message": "start at 0"}),
            json!({}),
        );
        assert_eq!(
            messages(optional.clone(), json!({"spec": {"n": 1}}), None),
            ["spec: Invalid value: start at 0"]
        );
        assert!(
            messages(
                optional,
                json!({"spec": {"n": 1}}),
                Some(json!({"spec": {"n": 0}}))
            )
            .is_empty()
        );
    }

    #[test]
    fn map_list_items_see_the_old_item_with_the_same_key() {
        let schema = json!({"type": "object", "properties": {"items": {"type": "array",
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "self.v == oldSelf.v", "message": "v is immutable"}]}}}});
        let old = json!({"items": [{"name": "a", "v": "1"}, {"name": "b", "v": "2"}]});
        // Reordered and one new item: unchanged values pass.
        let same = json!({"items": [{"name": "b", "v": "2"}, {"name": "c", "v": "9"}, {"name": "a", "v": "1"}]});
        assert!(messages(schema.clone(), same, Some(old.clone())).is_empty());
        let changed = json!({"items": [{"name": "b", "v": "3"}]});
        assert_eq!(
            messages(schema, changed, Some(old)),
            ["items[0]: Invalid value: v is immutable"]
        );
    }

    #[test]
    fn root_rules_see_the_name_but_not_the_rest_of_metadata() {
        let schema = json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('ok-') && !has(self.metadata.labels)"}]});
        let obj = |name: &str| json!({"metadata": {"name": name, "labels": {"a": "b"}}});
        assert!(messages(schema.clone(), obj("ok-1"), None).is_empty());
        assert_eq!(messages(schema, obj("bad"), None).len(), 1);
    }

    #[test]
    fn rules_that_do_not_compile_are_refused_naming_the_field() {
        for rule in [
            "self.a ==",
            "nope(self)",
            "x > 1",
            "lists.range(1000000000).size() > 0",
        ] {
            let err =
                RuleSet::compile(&spec_rule(json!({"rule": rule}), json!({})), "s").unwrap_err();
            assert_eq!(
                err[0].field,
                "s.properties[spec].x-kubernetes-validations[0].rule"
            );
            assert!(err[0].message.contains("compilation failed"), "{err:?}");
        }
        let deep = format!("{}true{}", "(".repeat(40), ")".repeat(40));
        let long = vec!["1"; 3000].join("+") + " > 0";
        for (rule, why) in [(deep, "nests deeper"), (long, "is longer than")] {
            let err =
                RuleSet::compile(&spec_rule(json!({"rule": rule}), json!({})), "s").unwrap_err();
            assert!(err[0].message.contains(why), "{err:?}");
        }
        // cel-rust's parser gives up on (or, in debug builds, panics at) deep right-nested
        // conditionals; either way the CRD is refused and the server goes on.
        let conditionals = format!("{}true", "true ? true : ".repeat(300));
        assert!(
            RuleSet::compile(&spec_rule(json!({"rule": conditionals}), json!({})), "s").is_err()
        );
        // Deep but allowed expressions compile and run.
        let nested = format!("{}self.a{} == 'y'", "(".repeat(32), ")".repeat(32));
        let chained = vec!["1"; 2000].join("+") + " > 0";
        for rule in [nested, chained] {
            let schema = spec_rule(json!({"rule": rule}), json!({}));
            assert!(messages(schema, json!({"spec": {"a": "y"}}), None).is_empty());
        }
        let err = RuleSet::compile(
            &spec_rule(json!({"rule": "true", "reason": "Nope"}), json!({})),
            "s",
        )
        .unwrap_err();
        assert_eq!(
            err[0].field,
            "s.properties[spec].x-kubernetes-validations[0].reason"
        );
    }

    #[test]
    fn every_rule_that_does_not_compile_is_refused_as_cel_go_words_it() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"size": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.size >>> 10"}, {"rule": "self.missing == 1"}]}}});
        let errs = RuleSet::compile(&schema, "s").unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(
            errs[0].message,
            "Invalid value: {\"Rule\":\"self.size \\u003e\\u003e\\u003e 10\",\"Message\":\"\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: compilation failed: ERROR: <input>:1:12: Syntax error: mismatched input '>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | self.size >>> 10\n | ...........^\nERROR: <input>:1:13: Syntax error: extraneous input '>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | self.size >>> 10\n | ............^"
        );
        assert!(
            errs[1].message.ends_with(
                "compilation failed: ERROR: <input>:1:5: undefined field 'missing'\n | self.missing == 1\n | ....^"
            ),
            "{errs:?}"
        );
        // A map, or an object keeping unknown fields, has any field.
        let open = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": "self.anything == 1"}]}}});
        assert!(RuleSet::compile(&open, "s").is_ok());
    }

    #[test]
    fn cost_grows_with_nesting_and_input() {
        let items = |n| Extent { items: n, bytes: 0 };
        let bytes = |n| Extent { items: 0, bytes: n };
        assert_eq!(estimated_cost(10, 0, 0, items(1_000_000)), 10);
        assert_eq!(estimated_cost(10, 0, 0, bytes(1_000_000)), 1_000_010);
        assert_eq!(estimated_cost(10, 1, 0, items(999)), 10_000);
        assert_eq!(estimated_cost(10, 3, 0, items(999)), 10_000_000_000);
        assert_eq!(estimated_cost(10, 40, 0, items(1000)), u64::MAX);
        assert_eq!(estimated_cost(10, 0, 1, bytes(99)), 10 * 10 * 100);
        // A huge string through replace is refused before it runs.
        let schema = spec_rule(
            json!({"rule": "self.a.replace('', self.a).size() > 0"}),
            json!({}),
        );
        let m = messages(schema, json!({"spec": {"a": "x".repeat(100_000)}}), None);
        assert!(m[0].contains("call cost exceeds limit"), "{m:?}");
    }

    #[test]
    fn the_per_object_budget_stops_evaluation() {
        let schema = json!({"type": "object", "properties": {"items": {"type": "array",
            "items": {"type": "array", "items": {"type": "integer"},
                "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x + y >= 0))"}]}}}});
        // Each item costs about 150² × nodes, below the per-call limit; 60 of them exhaust the
        // per-object budget, and evaluation stops there.
        let item: Vec<i64> = (0..150).collect();
        let m = messages(schema, json!({"items": vec![item; 60]}), None);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].starts_with("items[")
                && m[0].ends_with("]: Invalid value: \"array\": validation failed due to running out of cost budget, no further validation rules will be run"),
            "{m:?}"
        );
    }
}

#!/usr/bin/env python3
"""Writes src/fields/builtin.types: the shape of every built-in kind the control plane can
serve, as kube-apiserver's field manager and JSON decoder see it.

Two facts per field, from Kubernetes' own sources at one release:

- how server-side apply treats it (structured-merge-diff's schema: scalars, structs that are
  atomic, lists that are atomic, sets or maps with their keys, maps that are atomic): from
  the schemas client-go and kube-aggregator ship for their apply configurations
  (`applyconfigurations/internal/internal.go`, which applyconfiguration-gen derives from
  kube's OpenAPI), and for apiextensions.k8s.io, which ships none, from its Go types'
  markers (`+listType`, `+listMapKey`, `+mapType`, `+structType`, `patchStrategy`) by the
  rules kube-openapi's schemaconv applies;
- how the Go type encodes it (from the Go types' json tags): whether the field is omitted
  when empty (`omitempty`: scalars, slices and maps when empty, pointers when nil; `omitzero`)
  and what an object decoded from `{}` holds (non-omitempty scalars their zero value, nil
  slices, maps and pointers `null`, non-pointer structs their own zero object).

Usage: tools/builtin_types.py SRC > src/fields/builtin.types, where SRC holds checkouts of
kubernetes/{client-go,api,apimachinery,apiextensions-apiserver,kube-aggregator} at the tag
named in RELEASE, each in a directory of the repository's name.
"""

import json
import re
import sys
from pathlib import Path

import yaml

RELEASE = "v0.36.2"  # the Go modules of Kubernetes v1.36.2

# Go package directory (repository, path) -> OpenAPI name prefix.
PACKAGES = {
    ("apimachinery", "pkg/apis/meta/v1"): "io.k8s.apimachinery.pkg.apis.meta.v1",
    ("apimachinery", "pkg/api/resource"): "io.k8s.apimachinery.pkg.api.resource",
    ("apimachinery", "pkg/util/intstr"): "io.k8s.apimachinery.pkg.util.intstr",
    ("apimachinery", "pkg/runtime"): "io.k8s.apimachinery.pkg.runtime",
    ("apiextensions-apiserver", "pkg/apis/apiextensions/v1"):
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1",
    ("kube-aggregator", "pkg/apis/apiregistration/v1"):
        "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1",
}
# The stable versions of the built-in groups (k8s.io/api directories).
API_VERSIONS = [
    "admissionregistration/v1", "apps/v1", "autoscaling/v1", "autoscaling/v2", "batch/v1",
    "certificates/v1", "coordination/v1", "core/v1", "discovery/v1", "events/v1",
    "flowcontrol/v1", "networking/v1", "node/v1", "policy/v1", "rbac/v1", "resource/v1",
    "scheduling/v1", "storage/v1",
]
for gv in API_VERSIONS:
    PACKAGES[("api", gv)] = "io.k8s.api." + gv.replace("/", ".")

IMPORT_PATHS = {
    "k8s.io/apimachinery/" + path: prefix
    for (repo, path), prefix in PACKAGES.items() if repo == "apimachinery"
}
IMPORT_PATHS.update({"k8s.io/api/" + gv: "io.k8s.api." + gv.replace("/", ".")
                     for gv in API_VERSIONS})

# Go structs that encode themselves (MarshalJSON): what their zero value encodes as, and
# how server-side apply types them (by name, as the schemas above do).
ENCODES_ITSELF = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "null",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "null",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Duration": '"0s"',
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": "null",
    "io.k8s.apimachinery.pkg.api.resource.Quantity": '"0"',
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "0",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "null",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON": "null",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray": "null",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool": "null",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray":
        "null",
}
# Types whose OpenAPI schema has no type: structured-merge-diff deduces them from the value.
APIEXT = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1."
DEDUCED = {APIEXT + n for n in
           ["JSON", "JSONSchemaPropsOrArray", "JSONSchemaPropsOrBool",
            "JSONSchemaPropsOrStringArray"]}

GO_SCALARS = {
    "string": "string", "bool": "boolean", "byte": "number", "rune": "number",
    **{t: "number" for t in ["int", "int8", "int16", "int32", "int64", "uint", "uint8",
                             "uint16", "uint32", "uint64", "float32", "float64"]},
}
ZERO = {"string": '""', "boolean": "false", "number": "0"}


def fail(message):
    sys.exit(f"builtin_types.py: {message}")


class GoPackage:
    """The struct and named types of one Go package, with each struct field's Go type, json
    tag and markers."""

    def __init__(self, prefix, directory):
        self.prefix = prefix
        self.structs = {}  # name -> (type markers, [(go name, go type, tag, markers, imports)])
        self.named = {}  # name -> (underlying go type, imports)
        for path in sorted(directory.glob("*.go")):
            if path.name.endswith("_test.go") or path.name.startswith("zz_generated") \
                    or path.name.startswith("generated"):
                continue
            self.read(path.read_text())

    def read(self, text):
        imports = {}
        for alias, ipath in re.findall(r'^(?:import)?\s*(\w+\s+)?"(k8s\.io/[^"]+)"', text, re.M):
            alias = alias.strip() or ipath.rsplit("/", 1)[1]
            imports[alias] = ipath
        lines = text.splitlines()
        markers = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("//"):
                markers.append(line)
            elif not line.strip():
                pass
            else:
                m = re.match(r"^type (\w+) struct ?\{\}", line)
                if m:
                    self.structs[m.group(1)] = (markers, [])
                    markers = []
                    i += 1
                    continue
                m = re.match(r"^type (\w+) struct \{\s*$", line)
                if m:
                    fields, i = self.read_struct(lines, i + 1, imports)
                    self.structs[m.group(1)] = (markers, fields)
                else:
                    m = re.match(r"^type (\w+) ([^{=]+?)\s*(//.*)?$", line)
                    if m and not m.group(2).startswith("interface"):
                        self.named[m.group(1)] = (m.group(2).strip(), imports)
                markers = []
            i += 1

    @staticmethod
    def read_struct(lines, i, imports):
        fields, markers = [], []
        while not lines[i].startswith("}"):
            line = lines[i].strip()
            i += 1
            if line.startswith("//"):
                markers.append(line)
                continue
            m = re.match(r"^(\w+)\s+(\S+)\s+`([^`]*)`", line) or \
                re.match(r"^()([\w.*]+)\s+`([^`]*)`", line)
            if m:
                fields.append((m.group(1), m.group(2), m.group(3), markers, imports))
            markers = []
        return fields, i


class Go:
    """Every package of PACKAGES, read from the checkouts under `src`."""

    def __init__(self, src):
        self.packages = {}
        for (repo, path), prefix in PACKAGES.items():
            directory = src / repo / path
            if not directory.is_dir():
                fail(f"{directory} is missing: check out kubernetes/{repo} at {RELEASE}")
            self.packages[prefix] = GoPackage(prefix, directory)
        self.import_paths = dict(IMPORT_PATHS)
        self.import_paths["k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"] = \
            APIEXT[:-1]

    def resolve(self, prefix, gotype, imports):
        """A Go type as (kind, detail): ("scalar", smd scalar), ("bytes",), ("pointer", inner),
        ("slice", elem), ("map", value), ("struct", qualified name), ("any",)."""
        if gotype.startswith("*"):
            return ("pointer", (prefix, gotype[1:], imports))
        if gotype == "[]byte":
            return ("bytes",)
        if gotype.startswith("[]"):
            return ("slice", (prefix, gotype[2:], imports))
        if gotype.startswith("map["):
            return ("map", (prefix, gotype[gotype.index("]") + 1:], imports))
        if gotype in GO_SCALARS:
            return ("scalar", GO_SCALARS[gotype])
        if gotype in ("interface{}", "any"):
            return ("any",)
        if "." in gotype:
            alias, name = gotype.split(".", 1)
            ipath = imports.get(alias)
            if ipath == "k8s.io/apimachinery/pkg/types":
                return ("scalar", "string")  # UID, NamespacedName's strings
            if ipath not in self.import_paths:
                fail(f"{prefix}: {gotype}: package {ipath} is not read ({imports})")
            prefix = self.import_paths[ipath]
            gotype = name
        package = self.packages[prefix]
        if gotype in package.structs:
            return ("struct", f"{prefix}.{gotype}")
        if gotype in package.named:
            underlying, named_imports = package.named[gotype]
            return self.resolve(prefix, underlying, named_imports)
        fail(f"{prefix}.{gotype} is neither a struct nor a named type")

    def fields(self, qualified):
        """The json fields of a struct (inline members flattened): name -> (kind, omitempty,
        omitzero, markers, tag)."""
        prefix, name = qualified.rsplit(".", 1)
        _, members = self.packages[prefix].structs[name]
        out = {}
        for goname, gotype, tag, markers, imports in members:
            m = re.search(r'json:"([^"]*)"', tag)
            if not m or m.group(1) == "-":
                continue
            jname, *opts = m.group(1).split(",")
            kind = self.resolve(prefix, gotype, imports)
            if "inline" in opts:
                out.update(self.fields(kind[1]))
                continue
            out[jname or goname] = (kind, "omitempty" in opts, "omitzero" in opts, markers, tag)
        return out

    def type_markers(self, qualified):
        prefix, name = qualified.rsplit(".", 1)
        return self.packages[prefix].structs[name][0]


def presence(go, kind, omitempty, omitzero):
    """(zero json or None, omission) of a field."""
    tag = kind[0]
    if tag == "struct":
        zero = ENCODES_ITSELF.get(kind[1], "{}")
        return (None, "omitzero") if omitzero else (zero, None)
    if omitempty or omitzero:
        return None, ("omitnil" if tag in ("pointer", "any") else "omit")
    if tag == "scalar":
        return ZERO[kind[1]], None
    return "null", None


def smd_ref(tr):
    """A structured-merge-diff type reference as a type expression of the data file."""
    if "namedType" in tr:
        return named(tr["namedType"])
    if "scalar" in tr and "map" in tr:
        # An inlined untyped type: any JSON, maps merged by key unless atomic.
        atomic = tr["map"].get("elementRelationship") == "atomic"
        return "atomic-any" if atomic else "deduced"
    if "scalar" in tr:
        return {"untyped": "any", "numeric": "number"}.get(tr["scalar"], tr["scalar"])
    if "list" in tr:
        lst = tr["list"]
        rel = lst.get("elementRelationship", "atomic")
        if rel == "atomic":
            kind = "atomic"
        elif lst.get("keys"):
            kind = "map:" + ",".join(lst["keys"])
        else:
            kind = "set"
        return f"[{kind}]{smd_ref(lst['elementType'])}"
    if "map" in tr:
        mp = tr["map"]
        rel = "atomic" if mp.get("elementRelationship") == "atomic" else ""
        return "{" + rel + "}" + smd_ref(mp["elementType"])
    fail(f"unknown type reference {tr}")


def named(name):
    if name == "__untyped_atomic_":
        return "atomic-any"
    if name == "__untyped_deduced_":
        return "deduced"
    return name


def go_ref(go, kind, markers):
    """The type expression of a Go field by kube-openapi's rules (apiextensions types)."""
    tag = kind[0]
    if tag == "pointer":
        return go_ref(go, go.resolve(*kind[1]), markers)
    if tag == "scalar":
        return kind[1]
    if tag == "bytes":
        return "string"
    if tag == "any":
        return "deduced"
    if tag == "struct":
        return "deduced" if kind[1] in DEDUCED else kind[1]
    text = " ".join(markers)
    elem = go_ref(go, go.resolve(*kind[1]), [])
    if tag == "slice":
        list_type = re.search(r"\+listType=(\w+)", text)
        keys = re.findall(r"\+listMapKey=(\w+)", text)
        if list_type:
            kind_ = {"atomic": "atomic", "set": "set", "map": "map:" + ",".join(keys)}[
                list_type.group(1)]
        elif re.search(r"\+patchStrategy=merge", text):
            merge_key = re.search(r"\+patchMergeKey=(\w+)", text)
            kind_ = "map:" + merge_key.group(1) if merge_key else "set"
        else:
            kind_ = "atomic"
        return f"[{kind_}]{elem}"
    atomic = "atomic" if "+mapType=atomic" in text else ""
    return "{" + atomic + "}" + elem


def main():
    if len(sys.argv) != 2:
        fail("usage: builtin_types.py SRC")
    src = Path(sys.argv[1])
    go = Go(src)
    smd = {}
    for repo, path in [("client-go", "applyconfigurations/internal/internal.go"),
                       ("kube-aggregator", "pkg/client/applyconfiguration/internal/internal.go")]:
        text = (src / repo / path).read_text()
        start = text.index("typed.YAMLObject(`") + len("typed.YAMLObject(`")
        for t in yaml.safe_load(text[start:text.rindex("`)")])["types"]:
            smd[t["name"]] = t

    KEYED.update(keyed_fields(smd))
    groups = {}
    for (repo, path), prefix in PACKAGES.items():
        register = src / repo / path / "register.go"
        if register.exists():
            m = re.search(r'GroupName\s*=\s*"([^"]*)"', register.read_text())
            if m:
                groups[prefix] = (m.group(1), path.rsplit("/", 1)[1])

    out_types = {}
    pending = []
    kinds = []
    for name, t in sorted(smd.items()):
        prefix = name.rsplit(".", 1)[0]
        fields = {f["name"] for f in t.get("map", {}).get("fields", [])}
        if prefix in groups and {"apiVersion", "kind", "metadata"} <= fields \
                and not name.endswith("List"):
            group, version = groups[prefix]
            kinds.append(f"kind {group}/{version} {name.rsplit('.', 1)[1]} {name}")
            pending.append(name)
    crd = APIEXT + "CustomResourceDefinition"
    kinds.append(f"kind apiextensions.k8s.io/v1 CustomResourceDefinition {crd}")
    pending.append(crd)

    while pending:
        name = pending.pop()
        if name in out_types or name in ("atomic-any", "deduced"):
            continue
        if name in smd:
            lines, refs = from_smd(go, name, smd[name])
        else:
            lines, refs = from_go(go, name)
        out_types[name] = lines
        pending.extend(refs)

    print(f"# The shape of kube-apiserver's built-in kinds (Kubernetes {RELEASE}), as its field")
    print("# manager and JSON decoder see them. Generated by tools/builtin_types.py: do not edit.")
    print("#")
    print("# kind GROUP/VERSION KIND TYPE          a served kind and its type")
    print("# struct TYPE [atomic] [open TYPE-EXPR]  a struct, fields in the Go type's order; open:")
    print("#                                       undeclared fields of this type")
    print("#   FIELD TYPE-EXPR [=ZERO] [omit|omitnil|omitzero] [default=JSON]")
    print("# scalar TYPE                           any scalar (strings and numbers alike)")
    print("# deduced TYPE                          any JSON, maps merged by key")
    print("#")
    print("# TYPE-EXPR: string | number | boolean | any | deduced | atomic-any | TYPE |")
    print("#   [atomic]T | [set]T | [map:KEY,...]T (lists) | {}T | {atomic}T (maps of T).")
    print("# ZERO: what an object decoded from {} holds there ({} is the struct's own zero);")
    print("# without it the field is absent. omit: dropped when empty; omitnil: when null;")
    print("# omitzero: when equal to its zero. default: the value a keyed list's item has for a")
    print("# key field it omits.")
    for line in sorted(kinds):
        print(line)
    for name in sorted(out_types):
        for line in out_types[name]:
            print(line)


def keyed_fields(smd):
    """(type, field) of every key field of a keyed list: their defaults key items that omit
    them."""
    out = set()

    def visit(tr):
        if "list" in tr:
            lst = tr["list"]
            elem = lst["elementType"].get("namedType")
            for key in lst.get("keys", []):
                out.add((elem, key))
            visit(lst["elementType"])
        if "map" in tr and "elementType" in tr["map"]:
            visit(tr["map"]["elementType"])

    for t in smd.values():
        for f in t.get("map", {}).get("fields", []):
            visit(f["type"])
    return out


KEYED = set()


def from_smd(go, name, t):
    if "scalar" in t and "map" not in t:
        return [f"scalar {name}"], []
    if "map" in t and "scalar" in t:
        return [f"deduced {name}"], []
    mp = t["map"]
    head = f"struct {name}"
    if mp.get("elementRelationship") == "atomic":
        head += " atomic"
    if "elementType" in mp:
        head += " open " + smd_ref(mp["elementType"])
    lines, refs = [head], []
    gofields = go.fields(name)
    declared = {f["name"]: f for f in mp.get("fields", [])}
    for fname in declared:
        if fname not in gofields:
            fail(f"{name}.{fname}: in the apply schema but not in the Go type")
    # In the Go type's order: the order its JSON encoding writes fields in.
    for fname in gofields:
        if fname not in declared:
            continue
        f = declared[fname]
        kind, omitempty, omitzero, _, _ = gofields[f["name"]]
        ref = smd_ref(f["type"])
        line = field_line(go, f["name"], ref, kind, omitempty, omitzero)
        if (name, f["name"]) in KEYED and "default" in f:
            line += " default=" + json.dumps(f["default"], separators=(",", ":"))
        lines.append(line)
        refs.extend(named_refs(ref))
    missing = set(gofields) - {f["name"] for f in mp.get("fields", [])}
    if missing:
        fail(f"{name}: Go fields {sorted(missing)} are not in the apply schema")
    return lines, refs


def from_go(go, name):
    if name in DEDUCED:
        return [f"deduced {name}"], []
    markers = " ".join(go.type_markers(name))
    head = f"struct {name}" + (" atomic" if "+structType=atomic" in markers else "")
    lines, refs = [head], []
    for fname, (kind, omitempty, omitzero, fmarkers, tag) in go.fields(name).items():
        strategy = re.search(r'patchStrategy:"(\w+)"', tag)
        merge_key = re.search(r'patchMergeKey:"(\w+)"', tag)
        fmarkers = list(fmarkers)
        if strategy:
            fmarkers.append(f"+patchStrategy={strategy.group(1)}")
        if merge_key:
            fmarkers.append(f"+patchMergeKey={merge_key.group(1)}")
        ref = go_ref(go, kind, fmarkers)
        lines.append(field_line(go, fname, ref, kind, omitempty, omitzero))
        refs.extend(named_refs(ref))
    return lines, refs


def field_line(go, fname, ref, kind, omitempty, omitzero):
    zero, omission = presence(go, kind, omitempty, omitzero)
    line = f"  {fname} {ref}"
    if zero is not None:
        line += f" ={zero}"
    if omission:
        line += f" {omission}"
    return line


def named_refs(ref):
    base = re.sub(r"^(\[[^\]]*\]|\{[^}]*\})+", "", ref)
    return [] if base in ("string", "number", "boolean", "any", "deduced", "atomic-any") \
        else [base]


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes src/controllers/pod_template.types: the Go shape of core/v1 PodTemplateSpec and of
every type under it, as Go's reflection sees it, for the deployment controller's
`pod-template-hash` (kube-controller-manager hashes a printed dump of the Go struct value, which
shows every field in declaration order with its Go name and Go type, whether the JSON has it or
not).

Per struct, each field in declaration order: its Go name, its JSON key (or that it is inlined),
and its Go type; per named type, the type under it; each with the name Go's reflection prints
(`v1.Container`, `resource.Quantity`, `types.UID`: package name, not path).

Usage: tools/pod_template_types.py SRC > src/controllers/pod_template.types, where SRC holds
checkouts of kubernetes/{api,apimachinery} at the tag named in builtin_types.RELEASE, each in a
directory of the repository's name.
"""

import re
import sys
from pathlib import Path

from builtin_types import RELEASE, fail

# Go import path -> (repository, directory, the id prefix of the data file).
PACKAGES = {
    "k8s.io/api/core/v1": ("api", "core/v1", "io.k8s.api.core.v1"),
    "k8s.io/apimachinery/pkg/apis/meta/v1":
        ("apimachinery", "pkg/apis/meta/v1", "io.k8s.apimachinery.pkg.apis.meta.v1"),
    "k8s.io/apimachinery/pkg/api/resource":
        ("apimachinery", "pkg/api/resource", "io.k8s.apimachinery.pkg.api.resource"),
    "k8s.io/apimachinery/pkg/util/intstr":
        ("apimachinery", "pkg/util/intstr", "io.k8s.apimachinery.pkg.util.intstr"),
    "k8s.io/apimachinery/pkg/types":
        ("apimachinery", "pkg/types", "io.k8s.apimachinery.pkg.types"),
}
ROOT = ("k8s.io/api/core/v1", "PodTemplateSpec")

# Types whose value is not a JSON object of their Go fields (they encode themselves): the hash
# module prints their Go internals from their JSON form itself.
SPECIAL = {
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Time"),
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "FieldsV1"),
    ("k8s.io/apimachinery/pkg/api/resource", "Quantity"),
    ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString"),
}
BUILTIN = {"string", "bool", "int", "int8", "int16", "int32", "int64", "uint", "uint8",
           "uint16", "uint32", "uint64", "float32", "float64"}


class Package:
    """The structs (fields in declaration order) and named types of one Go package."""

    def __init__(self, ipath, directory):
        self.ipath = ipath
        self.name = ipath.rsplit("/", 1)[1]
        self.structs = {}  # name -> body lines, imports
        self.named = {}  # name -> (underlying go type, imports)
        for path in sorted(directory.glob("*.go")):
            if path.name.endswith("_test.go") or path.name.startswith(("zz_generated",
                                                                       "generated")):
                continue
            self.read(path.read_text())

    def read(self, text):
        imports = {}
        for alias, ipath in re.findall(r'^(?:import)?\s*(\w+\s+)?"([\w./-]+)"$', text, re.M):
            imports[alias.strip() or ipath.rsplit("/", 1)[-1]] = ipath
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            m = re.match(r"^type (\w+) struct ?\{\}", line)
            if m:
                self.structs[m.group(1)] = ([], imports)
            elif m := re.match(r"^type (\w+) struct \{\s*$", line):
                body = []
                i += 1
                while not lines[i].startswith("}"):
                    if lines[i].strip().startswith("/*"):
                        while "*/" not in lines[i]:
                            i += 1
                    else:
                        body.append(lines[i])
                    i += 1
                self.structs[m.group(1)] = (body, imports)
            elif m := re.match(r"^type (\w+) ([^{=]+?)\s*(//.*)?$", line):
                if not m.group(2).startswith("interface"):
                    self.named[m.group(1)] = (m.group(2).strip(), imports)
            i += 1

    @staticmethod
    def field(line, struct):
        """The field a line of a struct body declares ([] for comments and blank lines)."""
        line = line.strip()
        if not line or line.startswith("//"):
            return []
        m = re.match(r"^(\w+)\s+([\w.*\[\]]+)\s*(`[^`]*`)?\s*(//.*)?$", line)
        if m:
            return [(m.group(1), m.group(2), m.group(3) or "")]
        m = re.match(r"^([\w.*]+)\s*(`[^`]*`)?\s*(//.*)?$", line)
        if m:  # embedded: named after its type
            return [(m.group(1).lstrip("*").rsplit(".", 1)[-1], m.group(1), m.group(2) or "")]
        fail(f"{struct}: a field line not understood: {line!r}")


class Writer:
    def __init__(self, src):
        self.packages = {}
        for ipath, (repo, directory, _) in PACKAGES.items():
            path = src / repo / directory
            if not path.is_dir():
                fail(f"{path} is missing: check out kubernetes/{repo} at {RELEASE}")
            self.packages[ipath] = Package(ipath, path)
        self.out = {}  # id -> lines
        self.pending = []

    def ident(self, ipath, name):
        return f"{PACKAGES[ipath][2]}.{name}"

    def expr(self, gotype, ipath, imports):
        """A Go type as a type expression of the data file, queueing the named types it uses."""
        if gotype.startswith("*"):
            return "*" + self.expr(gotype[1:], ipath, imports)
        if gotype.startswith("[]"):
            return "[]" + self.expr(gotype[2:], ipath, imports)
        if gotype.startswith("map["):
            depth, end = 0, 0
            for end, c in enumerate(gotype):
                depth += {"[": 1, "]": -1}.get(c, 0)
                if c == "]" and depth == 0:
                    break
            key = self.expr(gotype[4:end], ipath, imports)
            return "{" + key + "}" + self.expr(gotype[end + 1:], ipath, imports)
        if gotype == "byte":
            return "uint8"
        if gotype in BUILTIN:
            return gotype
        if "." in gotype:
            alias, gotype = gotype.split(".", 1)
            if imports.get(alias) not in PACKAGES:
                fail(f"{ipath}: {alias}.{gotype}: package {imports.get(alias)} is not read")
            ipath = imports[alias]
        self.pending.append((ipath, gotype))
        return self.ident(ipath, gotype)

    def declare(self, ipath, name):
        ident = self.ident(ipath, name)
        if ident in self.out:
            return
        package = self.packages[ipath]
        display = f"{package.name}.{name}"
        if (ipath, name) in SPECIAL:
            self.out[ident] = [f"special {ident} {display}"]
        elif name in package.structs:
            body, imports = package.structs[name]
            lines = [f"struct {ident} {display}"]
            for goname, gotype, tag in (f for line in body for f in package.field(line, name)):
                m = re.search(r'json:"([^"]*)"', tag)
                if not m:
                    fail(f"{ident}.{goname}: no json tag")
                key, *opts = m.group(1).split(",")
                if "inline" in opts:
                    key = "-inline"
                elif key == "-":
                    key = "-none"
                lines.append(f"  {goname} {key or goname} {self.expr(gotype, ipath, imports)}")
            self.out[ident] = lines
        elif name in package.named:
            underlying, imports = package.named[name]
            if underlying in package.structs:
                fail(f"{ident}: a named type of {underlying} is not supported")
            self.out[ident] = [f"named {ident} {display} "
                               f"{self.expr(underlying, ipath, imports)}"]
        else:
            fail(f"{ident} is neither a struct nor a named type")

    def run(self):
        self.pending.append(ROOT)
        while self.pending:
            self.declare(*self.pending.pop())


def main():
    if len(sys.argv) != 2:
        fail("usage: pod_template_types.py SRC")
    writer = Writer(Path(sys.argv[1]))
    writer.run()
    print(f"# The Go shape of core/v1 PodTemplateSpec and every type under it (Kubernetes "
          f"{RELEASE}),")
    print("# as Go's reflection prints it. Generated by tools/pod_template_types.py: do not edit.")
    print("#")
    print("# struct ID NAME           a struct, fields in declaration order:")
    print("#   GONAME KEY TYPE        KEY: its JSON key, -inline (its fields are the enclosing")
    print("#                          object's), -none (not in JSON)")
    print("# named ID NAME TYPE       a named type and the type under it")
    print("# special ID NAME          a type that encodes itself (the hash module knows it)")
    print("#")
    print("# ID: a type's package and name; NAME: as Go's reflection prints it. TYPE: a Go")
    print("# builtin (string, bool, int32, ...), an ID, *TYPE, []TYPE or {KEY-TYPE}TYPE (a map).")
    for ident in sorted(writer.out):
        for line in writer.out[ident]:
            print(line)


if __name__ == "__main__":
    main()

// fuser-opt's own errors (files it cannot read or write) are one line on stderr with exit
// code 1, never a Python traceback; `-` is stdin / stdout; an input with no ops is an empty
// module, as in mlir-opt.

// RUN: not fuser-opt %S/Inputs/no_such_file.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not fuser-opt %S 2>&1 | filecheck %s --check-prefix=DIR
// RUN: not fuser-opt %s -o %t.no_such_dir/out.mlir 2>&1 | filecheck %s --check-prefix=OUTDIR
// RUN: not fuser-opt %s -o %S 2>&1 | filecheck %s --check-prefix=OUTISDIR
// RUN: fuser-opt - < %s 2>&1 | filecheck %s --check-prefix=STDIN
// RUN: fuser-opt %s -o - 2>&1 | filecheck %s --check-prefix=STDIN
// RUN: fuser-opt %S/Inputs/empty.mlir 2>&1 | filecheck %s --check-prefix=EMPTY
// RUN: fuser-opt %S/Inputs/only_comments.mlir 2>&1 | filecheck %s --check-prefix=EMPTY
// RUN: fuser-opt - < %S/Inputs/empty.mlir 2>&1 | filecheck %s --check-prefix=EMPTY

func.func @valid() {
  func.return
}

// MISSING-NOT: Traceback
// MISSING: {{^}}fuser-opt: error: cannot open input file '{{.*}}Inputs/no_such_file.mlir': No such file or directory{{$}}
// MISSING-NOT: {{.}}

// DIR-NOT: Traceback
// DIR: {{^}}fuser-opt: error: cannot open input file '{{.*}}': Is a directory{{$}}
// DIR-NOT: {{.}}

// OUTDIR-NOT: Traceback
// OUTDIR: {{^}}fuser-opt: error: cannot open output file '{{.*}}.no_such_dir/out.mlir': No such file or directory{{$}}
// OUTDIR-NOT: {{.}}

// OUTISDIR-NOT: Traceback
// OUTISDIR: {{^}}fuser-opt: error: cannot open output file '{{.*}}': Is a directory{{$}}
// OUTISDIR-NOT: {{.}}

// STDIN: builtin.module {
// STDIN-NEXT: func.func @valid() {
// STDIN-NEXT: func.return
// STDIN-NOT: error

// EMPTY-NOT: error
// EMPTY: {{^}}builtin.module {{[{]}}{{$}}
// EMPTY-NEXT: {{^[}]$}}
// EMPTY-NOT: {{.}}

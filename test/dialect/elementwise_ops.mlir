// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// Elementwise ops: every unary and binary kind, where, cast.

// Every unary kind on f32; logical_not/isnan/isinf yield i1.
func.func @unary_kinds(%x: !fuser.tensor<?x4xf32>) {
  %neg = fuser.unary neg %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %abs = fuser.unary abs %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %exp = fuser.unary exp %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %exp2 = fuser.unary exp2 %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %expm1 = fuser.unary expm1 %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %log = fuser.unary log %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %log2 = fuser.unary log2 %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %log1p = fuser.unary log1p %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %sqrt = fuser.unary sqrt %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %rsqrt = fuser.unary rsqrt %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %reciprocal = fuser.unary reciprocal %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %relu = fuser.unary relu %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %sigmoid = fuser.unary sigmoid %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %tanh = fuser.unary tanh %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %sin = fuser.unary sin %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %cos = fuser.unary cos %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %erf = fuser.unary erf %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %floor = fuser.unary floor %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %ceil = fuser.unary ceil %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %round = fuser.unary round %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %trunc = fuser.unary trunc %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %sign = fuser.unary sign %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
  %logical_not = fuser.unary logical_not %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xi1>
  %isnan = fuser.unary isnan %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xi1>
  %isinf = fuser.unary isinf %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xi1>
  func.return
}
// CHECK-LABEL: func.func @unary_kinds
// CHECK-NEXT: %neg = fuser.unary neg %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %abs = fuser.unary abs %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %exp = fuser.unary exp %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %exp2 = fuser.unary exp2 %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %expm1 = fuser.unary expm1 %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %log = fuser.unary log %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %log2 = fuser.unary log2 %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %log1p = fuser.unary log1p %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %sqrt = fuser.unary sqrt %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %rsqrt = fuser.unary rsqrt %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %reciprocal = fuser.unary reciprocal %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %relu = fuser.unary relu %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %sigmoid = fuser.unary sigmoid %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %tanh = fuser.unary tanh %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %sin = fuser.unary sin %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %cos = fuser.unary cos %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %erf = fuser.unary erf %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %floor = fuser.unary floor %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %ceil = fuser.unary ceil %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %round = fuser.unary round %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %trunc = fuser.unary trunc %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %sign = fuser.unary sign %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %logical_not = fuser.unary logical_not %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %isnan = fuser.unary isnan %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %isinf = fuser.unary isinf %x : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xi1>

// -----

// Integer inputs: the kinds that are not float-only, and bitwise_not.
func.func @unary_int(%x: !fuser.tensor<?x4xi32>) {
  %neg = fuser.unary neg %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi32>
  %abs = fuser.unary abs %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi32>
  %relu = fuser.unary relu %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi32>
  %sign = fuser.unary sign %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi32>
  %logical_not = fuser.unary logical_not %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi1>
  %bitwise_not = fuser.unary bitwise_not %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi32>
  func.return
}
// CHECK-LABEL: func.func @unary_int
// CHECK-NEXT: %neg = fuser.unary neg %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi32>
// CHECK-NEXT: %abs = fuser.unary abs %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi32>
// CHECK-NEXT: %relu = fuser.unary relu %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi32>
// CHECK-NEXT: %sign = fuser.unary sign %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi32>
// CHECK-NEXT: %logical_not = fuser.unary logical_not %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %bitwise_not = fuser.unary bitwise_not %x : !fuser.tensor<?x4xi32> -> !fuser.tensor<?x4xi32>

// -----

// Every binary kind on two tensors; comparisons and logical ops yield i1.
func.func @binary_kinds(%x: !fuser.tensor<?x4xf32>, %y: !fuser.tensor<?x4xf32>, %i: !fuser.tensor<?x4xi32>, %j: !fuser.tensor<?x4xi32>) {
  %add = fuser.binary add %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
  %sub = fuser.binary sub %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
  %mul = fuser.binary mul %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
  %div = fuser.binary div %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
  %pow = fuser.binary pow %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
  %fmod = fuser.binary fmod %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
  %maximum = fuser.binary maximum %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
  %minimum = fuser.binary minimum %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
  %eq = fuser.binary eq %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
  %ne = fuser.binary ne %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
  %lt = fuser.binary lt %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
  %le = fuser.binary le %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
  %gt = fuser.binary gt %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
  %ge = fuser.binary ge %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
  %logical_and = fuser.binary logical_and %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
  %logical_or = fuser.binary logical_or %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
  %bitwise_and = fuser.binary bitwise_and %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
  %bitwise_or = fuser.binary bitwise_or %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
  %bitwise_xor = fuser.binary bitwise_xor %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
  func.return
}
// CHECK-LABEL: func.func @binary_kinds
// CHECK-NEXT: %add = fuser.binary add %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %sub = fuser.binary sub %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %mul = fuser.binary mul %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %div = fuser.binary div %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %pow = fuser.binary pow %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %fmod = fuser.binary fmod %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %maximum = fuser.binary maximum %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %minimum = fuser.binary minimum %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %eq = fuser.binary eq %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %ne = fuser.binary ne %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %lt = fuser.binary lt %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %le = fuser.binary le %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %gt = fuser.binary gt %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %ge = fuser.binary ge %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %logical_and = fuser.binary logical_and %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %logical_or = fuser.binary logical_or %x, %y : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %bitwise_and = fuser.binary bitwise_and %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
// CHECK-NEXT: %bitwise_or = fuser.binary bitwise_or %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
// CHECK-NEXT: %bitwise_xor = fuser.binary bitwise_xor %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>

// -----

// Scalar operands on either side; broadcast dims broadcast against any extent.
func.func @binary_scalars_and_broadcast(%x: !fuser.tensor<?x4xf32>, %row: !fuser.tensor<bx4xf32>, %s: f64, %n: i64, %k: !fuser.tensor<?xi64>) {
  %a = fuser.binary mul %x, %s : (!fuser.tensor<?x4xf32>, f64) -> !fuser.tensor<?x4xf32>
  %b = fuser.binary sub %s, %x : (f64, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
  %c = fuser.binary add %x, %row : (!fuser.tensor<?x4xf32>, !fuser.tensor<bx4xf32>) -> !fuser.tensor<?x4xf32>
  %d = fuser.binary lt %k, %n : (!fuser.tensor<?xi64>, i64) -> !fuser.tensor<?xi1>
  func.return
}
// CHECK-LABEL: func.func @binary_scalars_and_broadcast
// CHECK-NEXT: %a = fuser.binary mul %x, %s : (!fuser.tensor<?x4xf32>, f64) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %b = fuser.binary sub %s, %x : (f64, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %c = fuser.binary add %x, %row : (!fuser.tensor<?x4xf32>, !fuser.tensor<bx4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %d = fuser.binary lt %k, %n : (!fuser.tensor<?xi64>, i64) -> !fuser.tensor<?xi1>

// -----

// where(cond, x, y): tensor or scalar values and condition, broadcasting.
func.func @where(%c: !fuser.tensor<?xbxi1>, %x: !fuser.tensor<?x8xf16>, %y: !fuser.tensor<bx8xf16>, %zero: f64, %flag: i1) {
  %a = fuser.where %c, %x, %y : (!fuser.tensor<?xbxi1>, !fuser.tensor<?x8xf16>, !fuser.tensor<bx8xf16>) -> !fuser.tensor<?x8xf16>
  %b = fuser.where %c, %x, %zero : (!fuser.tensor<?xbxi1>, !fuser.tensor<?x8xf16>, f64) -> !fuser.tensor<?x8xf16>
  %d = fuser.where %flag, %x, %y : (i1, !fuser.tensor<?x8xf16>, !fuser.tensor<bx8xf16>) -> !fuser.tensor<?x8xf16>
  func.return
}
// CHECK-LABEL: func.func @where
// CHECK-NEXT: %a = fuser.where %c, %x, %y : (!fuser.tensor<?xbxi1>, !fuser.tensor<?x8xf16>, !fuser.tensor<bx8xf16>) -> !fuser.tensor<?x8xf16>
// CHECK-NEXT: %b = fuser.where %c, %x, %zero : (!fuser.tensor<?xbxi1>, !fuser.tensor<?x8xf16>, f64) -> !fuser.tensor<?x8xf16>
// CHECK-NEXT: %d = fuser.where %flag, %x, %y : (i1, !fuser.tensor<?x8xf16>, !fuser.tensor<bx8xf16>) -> !fuser.tensor<?x8xf16>

// -----

// cast changes only the dtype; a layout-carrying input yields a plain result.
func.func @cast(%x: !fuser.tensor<?x4xbf16, order [0, 1]>) {
  %a = fuser.cast %x : !fuser.tensor<?x4xbf16, order [0, 1]> -> !fuser.tensor<?x4xf32>
  %b = fuser.cast %a : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xi1>
  %c = fuser.cast %b : !fuser.tensor<?x4xi1> -> !fuser.tensor<?x4xi64>
  func.return
}
// CHECK-LABEL: func.func @cast
// CHECK-NEXT: %a = fuser.cast %x : !fuser.tensor<?x4xbf16, order [0, 1]> -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %b = fuser.cast %a : !fuser.tensor<?x4xf32> -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %c = fuser.cast %b : !fuser.tensor<?x4xi1> -> !fuser.tensor<?x4xi64>

// -----

// The unary kinds of nvFuser beyond the basic set, on bf16; signbit and the is* predicates yield i1.
func.func @unary_parity_kinds(%x: !fuser.tensor<?x4xbf16>) {
  %signbit = fuser.unary signbit %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xi1>
  %frac = fuser.unary frac %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %tan = fuser.unary tan %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %asin = fuser.unary asin %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %acos = fuser.unary acos %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %atan = fuser.unary atan %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %sinh = fuser.unary sinh %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %cosh = fuser.unary cosh %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %asinh = fuser.unary asinh %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %acosh = fuser.unary acosh %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %atanh = fuser.unary atanh %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %log10 = fuser.unary log10 %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %erfc = fuser.unary erfc %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %lgamma = fuser.unary lgamma %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
  %isfinite = fuser.unary isfinite %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xi1>
  %isposinf = fuser.unary isposinf %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xi1>
  %isneginf = fuser.unary isneginf %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xi1>
  func.return
}
// CHECK-LABEL: func.func @unary_parity_kinds
// CHECK-NEXT: %signbit = fuser.unary signbit %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %frac = fuser.unary frac %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %tan = fuser.unary tan %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %asin = fuser.unary asin %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %acos = fuser.unary acos %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %atan = fuser.unary atan %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %sinh = fuser.unary sinh %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %cosh = fuser.unary cosh %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %asinh = fuser.unary asinh %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %acosh = fuser.unary acosh %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %atanh = fuser.unary atanh %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %log10 = fuser.unary log10 %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %erfc = fuser.unary erfc %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %lgamma = fuser.unary lgamma %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %isfinite = fuser.unary isfinite %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %isposinf = fuser.unary isposinf %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xi1>
// CHECK-NEXT: %isneginf = fuser.unary isneginf %x : !fuser.tensor<?x4xbf16> -> !fuser.tensor<?x4xi1>

// -----

// signbit and the is* predicates also take integers.
func.func @unary_predicates_int(%i: !fuser.tensor<?xi64>) {
  %signbit = fuser.unary signbit %i : !fuser.tensor<?xi64> -> !fuser.tensor<?xi1>
  %isfinite = fuser.unary isfinite %i : !fuser.tensor<?xi64> -> !fuser.tensor<?xi1>
  func.return
}
// CHECK-LABEL: func.func @unary_predicates_int
// CHECK-NEXT: %signbit = fuser.unary signbit %i : !fuser.tensor<?xi64> -> !fuser.tensor<?xi1>
// CHECK-NEXT: %isfinite = fuser.unary isfinite %i : !fuser.tensor<?xi64> -> !fuser.tensor<?xi1>

// -----

// truediv of integers is f32 (torch.true_divide); gcd and the shifts take integers; nextafter f32/f64.
func.func @binary_parity_kinds(%x: !fuser.tensor<?x4xbf16>, %y: !fuser.tensor<?x4xbf16>, %f: !fuser.tensor<?x4xf32>, %g: !fuser.tensor<?x4xf32>, %i: !fuser.tensor<?x4xi32>, %j: !fuser.tensor<?x4xi32>) {
  %truediv0 = fuser.binary truediv %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xf32>
  %truediv1 = fuser.binary truediv %x, %y : (!fuser.tensor<?x4xbf16>, !fuser.tensor<?x4xbf16>) -> !fuser.tensor<?x4xbf16>
  %remainder2 = fuser.binary remainder %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
  %remainder3 = fuser.binary remainder %x, %y : (!fuser.tensor<?x4xbf16>, !fuser.tensor<?x4xbf16>) -> !fuser.tensor<?x4xbf16>
  %atan24 = fuser.binary atan2 %x, %y : (!fuser.tensor<?x4xbf16>, !fuser.tensor<?x4xbf16>) -> !fuser.tensor<?x4xbf16>
  %nextafter5 = fuser.binary nextafter %f, %g : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
  %gcd6 = fuser.binary gcd %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
  %bitwise_left_shift7 = fuser.binary bitwise_left_shift %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
  %bitwise_right_shift8 = fuser.binary bitwise_right_shift %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
  %logical_right_shift9 = fuser.binary logical_right_shift %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
  func.return
}
// CHECK-LABEL: func.func @binary_parity_kinds
// CHECK-NEXT: %truediv0 = fuser.binary truediv %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %truediv1 = fuser.binary truediv %x, %y : (!fuser.tensor<?x4xbf16>, !fuser.tensor<?x4xbf16>) -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %remainder2 = fuser.binary remainder %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
// CHECK-NEXT: %remainder3 = fuser.binary remainder %x, %y : (!fuser.tensor<?x4xbf16>, !fuser.tensor<?x4xbf16>) -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %atan24 = fuser.binary atan2 %x, %y : (!fuser.tensor<?x4xbf16>, !fuser.tensor<?x4xbf16>) -> !fuser.tensor<?x4xbf16>
// CHECK-NEXT: %nextafter5 = fuser.binary nextafter %f, %g : (!fuser.tensor<?x4xf32>, !fuser.tensor<?x4xf32>) -> !fuser.tensor<?x4xf32>
// CHECK-NEXT: %gcd6 = fuser.binary gcd %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
// CHECK-NEXT: %bitwise_left_shift7 = fuser.binary bitwise_left_shift %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
// CHECK-NEXT: %bitwise_right_shift8 = fuser.binary bitwise_right_shift %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>
// CHECK-NEXT: %logical_right_shift9 = fuser.binary logical_right_shift %i, %j : (!fuser.tensor<?x4xi32>, !fuser.tensor<?x4xi32>) -> !fuser.tensor<?x4xi32>

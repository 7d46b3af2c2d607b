// RUN: fuser-opt %s --split-input-file -p decompose-welford | filecheck %s
// RUN: fuser-opt %s --split-input-file -p fuser-preseg | filecheck %s --check-prefix=PRESEG

// fuser.welford becomes sum / n and sum((x - mean)^2): the statistics of one (input, dims)
// share one sum and one mean. fuser-preseg runs it first, so no welford reaches segmentation.
// PRESEG-NOT: fuser.welford
// PRESEG: func.func @no_welford
// PRESEG-NOT: fuser.welford

// Fires: var_sum and avg over the same dims share the sum and the mean; the dynamic reduced
// extent is a fuser.dim; without keepdim the mean is squeezed for avg.
// CHECK-LABEL: func.func @avg_and_var_sum_share_one_mean
// CHECK-NEXT:    %0 = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    %1 = fuser.dim %x, 1 : !fuser.tensor<?x?xf32>
// CHECK-NEXT:    %2 = fuser.binary div %0, %1 : (!fuser.tensor<?xbxf32>, i64) -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    %3 = fuser.binary sub %x, %2 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
// CHECK-NEXT:    %4 = fuser.binary mul %3, %3 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
// CHECK-NEXT:    %m2 = fuser.reduction sum %4 dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    %avg = fuser.squeeze %2 dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    func.return %m2, %avg
func.func @avg_and_var_sum_share_one_mean(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) {
  %m2 = fuser.welford var_sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %avg = fuser.welford avg %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %m2, %avg : !fuser.tensor<?xf32>, !fuser.tensor<?xf32>
}

// -----

// keepdim: avg is the shared mean itself, var_sum keeps the broadcast dim.
// CHECK-LABEL: func.func @keepdim
// CHECK-NEXT:    %0 = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    %1 = fuser.dim %x, 1 : !fuser.tensor<?x?xf32>
// CHECK-NEXT:    %avg = fuser.binary div %0, %1 : (!fuser.tensor<?xbxf32>, i64) -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    %2 = fuser.binary sub %x, %avg
// CHECK-NEXT:    %3 = fuser.binary mul %2, %2
// CHECK-NEXT:    %m2 = fuser.reduction sum %3 dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    func.return %m2, %avg
func.func @keepdim(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?xbxf32>, !fuser.tensor<?xbxf32>) {
  %m2 = fuser.welford var_sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %avg = fuser.welford avg %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  func.return %m2, %avg : !fuser.tensor<?xbxf32>, !fuser.tensor<?xbxf32>
}

// -----

// Several static reduced dims: the count is one constant (4 * 8). A bf16 input is cast to
// f32 once and everything accumulates in f32.
// CHECK-LABEL: func.func @multiple_static_dims_bf16
// CHECK-NEXT:    %0 = fuser.cast %x : !fuser.tensor<4x?x8xbf16> -> !fuser.tensor<4x?x8xf32>
// CHECK-NEXT:    %1 = fuser.reduction sum %0 dims [0, 2] keepdim : !fuser.tensor<4x?x8xf32> -> !fuser.tensor<bx?xbxf32>
// CHECK-NEXT:    %2 = arith.constant 32 : i64
// CHECK-NEXT:    %3 = fuser.binary div %1, %2 : (!fuser.tensor<bx?xbxf32>, i64) -> !fuser.tensor<bx?xbxf32>
// CHECK-NEXT:    %4 = fuser.binary sub %0, %3 : (!fuser.tensor<4x?x8xf32>, !fuser.tensor<bx?xbxf32>) -> !fuser.tensor<4x?x8xf32>
// CHECK-NEXT:    %5 = fuser.binary mul %4, %4 : (!fuser.tensor<4x?x8xf32>, !fuser.tensor<4x?x8xf32>) -> !fuser.tensor<4x?x8xf32>
// CHECK-NEXT:    %m2 = fuser.reduction sum %5 dims [0, 2] : !fuser.tensor<4x?x8xf32> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    func.return %m2
func.func @multiple_static_dims_bf16(%x: !fuser.tensor<4x?x8xbf16>) -> !fuser.tensor<?xf32> {
  %m2 = fuser.welford var_sum %x dims [0, 2] : !fuser.tensor<4x?x8xbf16> -> !fuser.tensor<?xf32>
  func.return %m2 : !fuser.tensor<?xf32>
}

// -----

// Dynamic reduced dims multiply their fuser.dims; the count tensor is a fuser.full with one
// extent (a fuser.dim of the input) per dynamic result dim.
// CHECK-LABEL: func.func @count_over_dynamic_dims
// CHECK-NEXT:    %0 = fuser.dim %x, 1 : !fuser.tensor<?x?x?xf64>
// CHECK-NEXT:    %1 = fuser.dim %x, 0 : !fuser.tensor<?x?x?xf64>
// CHECK-NEXT:    %2 = fuser.dim %x, 2 : !fuser.tensor<?x?x?xf64>
// CHECK-NEXT:    %3 = arith.muli %1, %2 : i64
// CHECK-NEXT:    %n = fuser.full(%0) value %3 : (i64) -> !fuser.tensor<?xi64>
// CHECK-NEXT:    func.return %n
func.func @count_over_dynamic_dims(%x: !fuser.tensor<?x?x?xf64>) -> !fuser.tensor<?xi64> {
  %n = fuser.welford n %x dims [0, 2] : !fuser.tensor<?x?x?xf64> -> !fuser.tensor<?xi64>
  func.return %n : !fuser.tensor<?xi64>
}

// -----

// Different dims are different reductions: nothing is shared between them.
// CHECK-LABEL: func.func @different_dims
// CHECK-NEXT:    %0 = fuser.reduction sum %x dims [0] keepdim
// CHECK-NEXT:    %1 = fuser.dim %x, 0
// CHECK-NEXT:    %2 = fuser.binary div %0, %1
// CHECK-NEXT:    %a = fuser.squeeze %2 dims [0]
// CHECK-NEXT:    %3 = fuser.reduction sum %x dims [1] keepdim
// CHECK-NEXT:    %4 = fuser.dim %x, 1
// CHECK-NEXT:    %5 = fuser.binary div %3, %4
// CHECK-NEXT:    %b = fuser.squeeze %5 dims [1]
// CHECK-NEXT:    func.return %a, %b
func.func @different_dims(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) {
  %a = fuser.welford avg %x dims [0] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %b = fuser.welford avg %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %a, %b : !fuser.tensor<?xf32>, !fuser.tensor<?xf32>
}

// -----

// Does not fire: a plain reduction is left alone.
// CHECK-LABEL: func.func @no_welford
// CHECK-NEXT:    %s = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    func.return %s
func.func @no_welford(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?xf32> {
  %s = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %s : !fuser.tensor<?xf32>
}

// -----

// A keepdim avg typed more precisely than its input keeps its type (its own division); the
// shared mean still feeds var_sum.
// CHECK-LABEL: func.func @refined_result_type
// CHECK-NEXT:    %0 = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    %1 = fuser.dim %x, 1 : !fuser.tensor<?x?xf32>
// CHECK-NEXT:    %2 = fuser.binary div %0, %1 : (!fuser.tensor<?xbxf32>, i64) -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    %avg = fuser.binary div %0, %1 : (!fuser.tensor<?xbxf32>, i64) -> !fuser.tensor<4xbxf32>
// CHECK-NEXT:    %3 = fuser.binary sub %x, %2
// CHECK-NEXT:    %4 = fuser.binary mul %3, %3
// CHECK-NEXT:    %m2 = fuser.reduction sum %4 dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    func.return %avg, %m2
func.func @refined_result_type(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<4xbxf32>, !fuser.tensor<?xbxf32>) {
  %avg = fuser.welford avg %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<4xbxf32>
  %m2 = fuser.welford var_sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  func.return %avg, %m2 : !fuser.tensor<4xbxf32>, !fuser.tensor<?xbxf32>
}

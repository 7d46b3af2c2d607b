// RUN: fuser-opt %s --split-input-file | fuser-opt --split-input-file | filecheck %s
// RUN: fuser-opt %s --split-input-file --print-op-generic | fuser-opt --split-input-file | filecheck %s

// fuser.welford: one statistic (avg, var_sum, n) of the Welford reduction over dims;
// keepdim leaves broadcast dims in place. avg/var_sum are in the input dtype for f32/f64.

func.func @welford_stats(%x: !fuser.tensor<?x?x8xf32>) {
  %avg = fuser.welford avg %x dims [1] : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?x8xf32>
  %m2 = fuser.welford var_sum %x dims [0, 2] : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?xf32>
  %n = fuser.welford n %x dims [2] keepdim : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?x?xbxi64>
  func.return
}
// CHECK-LABEL: func.func @welford_stats
// CHECK-NEXT: %avg = fuser.welford avg %x dims [1] : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?x8xf32>
// CHECK-NEXT: %m2 = fuser.welford var_sum %x dims [0, 2] : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?xf32>
// CHECK-NEXT: %n = fuser.welford n %x dims [2] keepdim : !fuser.tensor<?x?x8xf32> -> !fuser.tensor<?x?xbxi64>

// -----

// f16/bf16 inputs accumulate in f32: avg and var_sum are f32. Reducing every dim without
// keepdim gives rank-0 results; f64 stays f64.
func.func @welford_dtypes(%h: !fuser.tensor<4x?xf16>, %b: !fuser.tensor<?xbf16>, %d: !fuser.tensor<3x5xf64>) {
  %0 = fuser.welford avg %h dims [0, 1] keepdim : !fuser.tensor<4x?xf16> -> !fuser.tensor<bxbxf32>
  %1 = fuser.welford var_sum %b dims [0] : !fuser.tensor<?xbf16> -> !fuser.tensor<f32>
  %2 = fuser.welford var_sum %d dims [1] : !fuser.tensor<3x5xf64> -> !fuser.tensor<3xf64>
  %3 = fuser.welford n %d dims [0, 1] : !fuser.tensor<3x5xf64> -> !fuser.tensor<i64>
  func.return
}
// CHECK-LABEL: func.func @welford_dtypes
// CHECK-NEXT: %0 = fuser.welford avg %h dims [0, 1] keepdim : !fuser.tensor<4x?xf16> -> !fuser.tensor<bxbxf32>
// CHECK-NEXT: %1 = fuser.welford var_sum %b dims [0] : !fuser.tensor<?xbf16> -> !fuser.tensor<f32>
// CHECK-NEXT: %2 = fuser.welford var_sum %d dims [1] : !fuser.tensor<3x5xf64> -> !fuser.tensor<3xf64>
// CHECK-NEXT: %3 = fuser.welford n %d dims [0, 1] : !fuser.tensor<3x5xf64> -> !fuser.tensor<i64>

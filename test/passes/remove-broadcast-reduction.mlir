// RUN: fuser-opt %s --split-input-file -p remove-broadcast-reduction | filecheck %s

// Every reduced dim is broadcast: the reduction is a squeeze.
func.func @only_broadcast(%x: !fuser.tensor<bx?xf32>) -> !fuser.tensor<?xf32> {
  %r = fuser.reduction min %x dims [0] : !fuser.tensor<bx?xf32> -> !fuser.tensor<?xf32>
  func.return %r : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @only_broadcast
// CHECK-NEXT:    %[[S:[^ ]+]] = fuser.squeeze %x dims [0] : !fuser.tensor<bx?xf32> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    func.return %[[S]] : !fuser.tensor<?xf32>

// -----

// A broadcast dim and a real one: only the real one is reduced.
func.func @mixed(%x: !fuser.tensor<?xbx8xbf16>) -> !fuser.tensor<?xbf16> {
  %r = fuser.reduction sum %x dims [1, 2] : !fuser.tensor<?xbx8xbf16> -> !fuser.tensor<?xbf16>
  func.return %r : !fuser.tensor<?xbf16>
}
// CHECK-LABEL: func.func @mixed
// CHECK-NEXT:    %[[S:[^ ]+]] = fuser.squeeze %x dims [1] : !fuser.tensor<?xbx8xbf16> -> !fuser.tensor<?x8xbf16>
// CHECK-NEXT:    %[[R:[^ ]+]] = fuser.reduction sum %[[S]] dims [1] : !fuser.tensor<?x8xbf16> -> !fuser.tensor<?xbf16>
// CHECK-NEXT:    func.return %[[R]] : !fuser.tensor<?xbf16>

// -----

// keepdim: the broadcast dims come back in place after the reduction of the others.
func.func @keepdim(%x: !fuser.tensor<?xbx8xf32>) -> !fuser.tensor<?xbxbxf32> {
  %r = fuser.reduction max %x dims [1, 2] keepdim : !fuser.tensor<?xbx8xf32> -> !fuser.tensor<?xbxbxf32>
  func.return %r : !fuser.tensor<?xbxbxf32>
}
// CHECK-LABEL: func.func @keepdim
// CHECK-NEXT:    %[[S:[^ ]+]] = fuser.squeeze %x dims [1] : !fuser.tensor<?xbx8xf32> -> !fuser.tensor<?x8xf32>
// CHECK-NEXT:    %[[R:[^ ]+]] = fuser.reduction max %[[S]] dims [1] keepdim : !fuser.tensor<?x8xf32> -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    %[[B:[^ ]+]] = fuser.broadcast %[[R]] dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xbxbxf32>
// CHECK-NEXT:    func.return %[[B]] : !fuser.tensor<?xbxbxf32>

// -----

// keepdim over broadcast dims only: the reduction is its input.
func.func @keepdim_only_broadcast(%x: !fuser.tensor<?xbxf32>) -> !fuser.tensor<?xbxf32> {
  %e = fuser.unary exp %x : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xbxf32>
  %r = fuser.reduction sum %e dims [1] keepdim : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xbxf32>
  func.return %r : !fuser.tensor<?xbxf32>
}
// CHECK-LABEL: func.func @keepdim_only_broadcast
// CHECK-NEXT:    %[[E:[^ ]+]] = fuser.unary exp %x
// CHECK-NEXT:    func.return %[[E]] : !fuser.tensor<?xbxf32>

// -----

// ... but a returned fusion input may not stand for an output (it would alias the input):
// a squeeze and a broadcast instead.
func.func @keepdim_of_an_input(%x: !fuser.tensor<?xbxf32>) -> !fuser.tensor<?xbxf32> {
  %r = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xbxf32>
  func.return %r : !fuser.tensor<?xbxf32>
}
// CHECK-LABEL: func.func @keepdim_of_an_input
// CHECK-NEXT:    %[[S:[^ ]+]] = fuser.squeeze %x dims [1] : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xf32>
// CHECK-NEXT:    %[[B:[^ ]+]] = fuser.broadcast %[[S]] dims [1] : !fuser.tensor<?xf32> -> !fuser.tensor<?xbxf32>
// CHECK-NEXT:    func.return %[[B]] : !fuser.tensor<?xbxf32>

// -----

// No broadcast dim reduced: unchanged.
func.func @untouched(%x: !fuser.tensor<bx?xf32>) -> !fuser.tensor<bxf32> {
  %r = fuser.reduction sum %x dims [1] : !fuser.tensor<bx?xf32> -> !fuser.tensor<bxf32>
  func.return %r : !fuser.tensor<bxf32>
}
// CHECK-LABEL: func.func @untouched
// CHECK-NEXT:    fuser.reduction sum %x dims [1] : !fuser.tensor<bx?xf32> -> !fuser.tensor<bxf32>

// The `segment` pass: every tensor op gets `fuser.kernel = <index>`, the fusion gets
// `fuser.kernels` (name, scheduler and, where a kernel boundary was forced, the reason).
// Segmentation runs on the fusion as given (dynamic extents are symbols), so these cases
// need no concretization.
// RUN: fuser-opt %s --split-input-file -p segment | filecheck %s

// =======================================================================================
// One kernel per scheduler kind.

// Pointwise: elementwise ops, a broadcast operand, a scalar constant; two outputs.
func.func @pointwise(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<bx?xf16>) -> (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) {
  %e = fuser.unary exp %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %c = fuser.cast %y : !fuser.tensor<bx?xf16> -> !fuser.tensor<bx?xf32>
  %a = fuser.binary add %e, %c : (!fuser.tensor<?x?xf32>, !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32>
  %two = arith.constant 2.000000e+00 : f64
  %m = fuser.binary mul %x, %two : (!fuser.tensor<?x?xf32>, f64) -> !fuser.tensor<?x?xf32>
  func.return %a, %m : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @pointwise
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_pointwise", scheduler = "pointwise"}]
// CHECK:         fuser.unary exp %x {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.cast %y {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.binary add {{.*}} {fuser.kernel = 0 : i64}
// CHECK-NEXT:    %two = arith.constant 2.000000e+00 : f64{{$}}
// CHECK-NEXT:    fuser.binary mul {{.*}} {fuser.kernel = 0 : i64}

// -----

// Outputs of unrelated extents still share one pointwise kernel (one group per domain).
func.func @pointwise_groups(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) {
  %e = fuser.unary exp %x : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %zero = arith.constant 0.000000e+00 : f64
  %p = fuser.pad %x [0:0, 1:1] value %zero : (!fuser.tensor<?x?xf32>, f64) -> !fuser.tensor<?x?xf32>
  func.return %e, %p : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @pointwise_groups
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_pointwise", scheduler = "pointwise"}]
// CHECK:         fuser.unary exp %x {fuser.kernel = 0 : i64}
// CHECK:         fuser.pad %x [0:0, 1:1] value %zero {fuser.kernel = 0 : i64}

// -----

// A plain inner reduction.
func.func @row_sum(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?xf32> {
  %s = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %s : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @row_sum
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_reduction", scheduler = "reduction"}]
// CHECK:         fuser.reduction sum %x dims [1] {fuser.kernel = 0 : i64}

// -----

// An outer reduction (the innermost dim is kept) is a reduction kernel too.
func.func @outer_sum(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<bx?xf32> {
  %s = fuser.reduction sum %x dims [0] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<bx?xf32>
  func.return %s : !fuser.tensor<bx?xf32>
}
// CHECK-LABEL: func.func @outer_sum
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_reduction", scheduler = "reduction"}]

// -----

// softmax: reduction results flow back onto full rows -> one inner persistent kernel.
func.func @softmax(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %m = fuser.reduction max %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %x, %m : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %e = fuser.unary exp %d : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %s = fuser.reduction sum %e dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %y = fuser.binary div %e, %s : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  func.return %y : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @softmax
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_inner_persistent", scheduler = "inner_persistent"}]
// CHECK-COUNT-5: {fuser.kernel = 0 : i64}
// CHECK-NOT:     fuser.kernel = 1

// -----

// layer-norm with weight and bias: one inner persistent kernel; `fuser.dim` is not a kernel op.
func.func @layer_norm(%x: !fuser.tensor<?x?xf32>, %w: !fuser.tensor<?xf32>, %b: !fuser.tensor<?xf32>) -> !fuser.tensor<?x?xf32> {
  %n = fuser.dim %x, 1 : !fuser.tensor<?x?xf32>
  %s1 = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %mean = fuser.binary div %s1, %n : (!fuser.tensor<?xbxf32>, i64) -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %x, %mean : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %d2 = fuser.binary mul %d, %d : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %s2 = fuser.reduction sum %d2 dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %var = fuser.binary div %s2, %n : (!fuser.tensor<?xbxf32>, i64) -> !fuser.tensor<?xbxf32>
  %eps = arith.constant 1.000000e-05 : f64
  %ve = fuser.binary add %var, %eps : (!fuser.tensor<?xbxf32>, f64) -> !fuser.tensor<?xbxf32>
  %inv = fuser.unary rsqrt %ve : !fuser.tensor<?xbxf32> -> !fuser.tensor<?xbxf32>
  %nrm = fuser.binary mul %d, %inv : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %wb = fuser.broadcast %w dims [0] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf32>
  %sc = fuser.binary mul %nrm, %wb : (!fuser.tensor<?x?xf32>, !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32>
  %bb = fuser.broadcast %b dims [0] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf32>
  %y = fuser.binary add %sc, %bb : (!fuser.tensor<?x?xf32>, !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %y : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_inner_persistent", scheduler = "inner_persistent"}]
// CHECK:         fuser.dim %x, 1 :
// CHECK-COUNT-13: {fuser.kernel = 0 : i64}
// CHECK-NOT:     fuser.kernel = 1

// -----

// A gather of a row-consistent value by a per-row index (cross-entropy's pick) stays in the kernel.
func.func @take_along_rows(%x: !fuser.tensor<?x?xf32>, %i: !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32> {
  %m = fuser.reduction max %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %d = fuser.binary sub %x, %m : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %t = fuser.take_along_axis %d[%i] dim 1 : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxi64>) -> !fuser.tensor<?xbxf32>
  func.return %t : !fuser.tensor<?xbxf32>
}
// CHECK-LABEL: func.func @take_along_rows
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_inner_persistent", scheduler = "inner_persistent"}]

// =======================================================================================
// Forced kernel boundaries and their reasons.

// -----

func.func @reductions_over_different_dims(%x: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) {
  %a = fuser.reduction sum %x dims [0] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %b = fuser.reduction max %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %a, %b : !fuser.tensor<?xf32>, !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @reductions_over_different_dims
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_reduction", scheduler = "reduction"},
// CHECK-SAME:      {name = "fuser_kernel_1_reduction", scheduler = "reduction", reason = "split before fuser.reduction: reductions over different dims [0] and [1]"}]
// CHECK:         fuser.reduction sum %x dims [0] {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.reduction max %x dims [1] {fuser.kernel = 1 : i64}

// -----

// Reductions of tensors whose extents are unrelated symbols.
func.func @reduction_inputs_of_different_domains(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) {
  %a = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %b = fuser.reduction sum %y dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %a, %b : !fuser.tensor<?xf32>, !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @reduction_inputs_of_different_domains
// CHECK-SAME:    reason = "split before fuser.reduction: reduction inputs have different domains {{\[.*\]}} and {{\[.*\]}}"
// CHECK:         fuser.reduction sum %x dims [1] {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.reduction sum %y dims [1] {fuser.kernel = 1 : i64}

// -----

// The elementwise add joins the row extents of %x and %y: one kernel.
func.func @elementwise_joins_extents(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32> {
  %s = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %a = fuser.binary add %s, %y : (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>) -> !fuser.tensor<?xf32>
  func.return %a : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @elementwise_joins_extents
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_reduction", scheduler = "reduction"}]

// -----

// A permute of a reduction result changes which index is the row.
func.func @remapped_reduction_result(%x: !fuser.tensor<?x?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %s = fuser.reduction sum %x dims [2] : !fuser.tensor<?x?x?xf32> -> !fuser.tensor<?x?xf32>
  %p = fuser.permute %s dims [1, 0] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  func.return %p : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @remapped_reduction_result
// CHECK-SAME:    {name = "fuser_kernel_0_reduction", scheduler = "reduction"},
// CHECK-SAME:    {name = "fuser_kernel_1_pointwise", scheduler = "pointwise", reason = "split before fuser.permute: fuser.permute remaps the indices of a reduction result"}
// CHECK:         fuser.reduction sum %x dims [2] {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.permute %s dims [1, 0] {fuser.kernel = 1 : i64}

// -----

// A reduction result combined with a tensor whose reduced dim has another extent.
func.func @combined_with_other_domain(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?x5xf32>) -> !fuser.tensor<?x5xf32> {
  %s = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %a = fuser.binary add %s, %y : (!fuser.tensor<?xbxf32>, !fuser.tensor<?x5xf32>) -> !fuser.tensor<?x5xf32>
  func.return %a : !fuser.tensor<?x5xf32>
}
// CHECK-LABEL: func.func @combined_with_other_domain
// CHECK-SAME:    {name = "fuser_kernel_1_pointwise", scheduler = "pointwise", reason = "split before fuser.binary: fuser.binary combines a reduction result with a value of another domain"}

// -----

// Reducing all of a reduction result again (a sum of per-column sums) is a grid reduction of
// the same kernel: each block folds its columns' sums, the last block combines the partials.
func.func @reduction_of_reduced(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<f32> {
  %a = fuser.reduction sum %x dims [0] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %b = fuser.reduction sum %a dims [0] : !fuser.tensor<?xf32> -> !fuser.tensor<f32>
  func.return %b : !fuser.tensor<f32>
}
// CHECK-LABEL: func.func @reduction_of_reduced
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_reduction", scheduler = "reduction"}]

// -----

// A grid total cannot flow back onto the rows (each row would need every other row first).
func.func @grid_total_back_onto_rows(%x: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32> {
  %a = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %b = fuser.reduction sum %a dims [0] : !fuser.tensor<?xf32> -> !fuser.tensor<f32>
  %c = fuser.broadcast %b dims [0, 1] : !fuser.tensor<f32> -> !fuser.tensor<bxbxf32>
  %d = fuser.binary div %x, %c : (!fuser.tensor<?x?xf32>, !fuser.tensor<bxbxf32>) -> !fuser.tensor<?x?xf32>
  func.return %d : !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @grid_total_back_onto_rows
// CHECK-SAME:    reason = "split before fuser.broadcast: fuser.broadcast of a grid reduction result is not elementwise"

// -----

// A reduction of part of a per-row value is neither a row nor a grid reduction.
func.func @partial_reduction_of_row_values(%x: !fuser.tensor<?x?x?xf32>) -> !fuser.tensor<?xf32> {
  %a = fuser.reduction sum %x dims [2] : !fuser.tensor<?x?x?xf32> -> !fuser.tensor<?x?xf32>
  %b = fuser.reduction sum %a dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %b : !fuser.tensor<?xf32>
}
// CHECK-LABEL: func.func @partial_reduction_of_row_values
// CHECK-SAME:    reason = "split before fuser.reduction: fuser.reduction of the per-row value [{{.*}}] reduces dims [1], not all of them"

// -----

// A pointwise output of another shape cannot be stored by the reduction kernel.
func.func @output_of_other_shape(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?x?x?xf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?x?x?xf32>) {
  %s = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %e = fuser.unary exp %y : !fuser.tensor<?x?x?xf32> -> !fuser.tensor<?x?x?xf32>
  func.return %s, %e : !fuser.tensor<?xf32>, !fuser.tensor<?x?x?xf32>
}
// CHECK-LABEL: func.func @output_of_other_shape
// CHECK-SAME:    {name = "fuser_kernel_1_pointwise", scheduler = "pointwise", reason = "split before fuser.unary: output {{\[.*\]}} is not shaped like the reduction domain {{\[.*\]}}"}
// CHECK:         fuser.reduction sum %x dims [1] {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.unary exp %y {fuser.kernel = 1 : i64}

// -----

// An op on another input (y + 1) between two row reductions of x does not split them: the
// groups tied by dataflow or a shared input are segmented separately, so x is read by one kernel.
// CHECK-LABEL: func.func @unrelated_op_between_reductions
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_reduction", scheduler = "reduction"}, {name = "fuser_kernel_1_pointwise", scheduler = "pointwise", reason = "split before fuser.binary: output [s2] is not shaped like the reduction domain [s0, s1]"}]
// CHECK:         fuser.reduction sum %x dims [1] {fuser.kernel = 0 : i64}
// CHECK:         fuser.binary add %y, %{{.*}} {fuser.kernel = 1 : i64}
// CHECK:         fuser.reduction max %x dims [1] {fuser.kernel = 0 : i64}
func.func @unrelated_op_between_reductions(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?xf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<?xf32>, !fuser.tensor<?xf32>) {
  %s = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %c = arith.constant 1.0 : f64
  %z = fuser.binary add %y, %c : (!fuser.tensor<?xf32>, f64) -> !fuser.tensor<?xf32>
  %m = fuser.reduction max %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %s, %z, %m : !fuser.tensor<?xf32>, !fuser.tensor<?xf32>, !fuser.tensor<?xf32>
}

// -----

// Static and symbolic extents are one domain: x (`?x?`) times a static 4x8 broadcast of the
// weight is the domain [4, 8] on both sides, so the row kernel takes the epilogue (it was
// split off into a pointwise kernel re-reading x, plus an empty one).
func.func @static_broadcast_after_reduction(%x: !fuser.tensor<?x?xf32>, %w: !fuser.tensor<?xf32>) -> !fuser.tensor<4x8xf32> {
  %s = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %c = fuser.binary sub %x, %s : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %wb = fuser.broadcast_in_dim %w dims [1] : !fuser.tensor<?xf32> -> !fuser.tensor<bx?xf32>
  %we = fuser.expand %wb : !fuser.tensor<bx?xf32> -> !fuser.tensor<4x8xf32>
  %o = fuser.binary mul %c, %we : (!fuser.tensor<?x?xf32>, !fuser.tensor<4x8xf32>) -> !fuser.tensor<4x8xf32>
  func.return %o : !fuser.tensor<4x8xf32>
}
// CHECK-LABEL: func.func @static_broadcast_after_reduction
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_inner_persistent", scheduler = "inner_persistent"}]
// CHECK:         fuser.expand %wb {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.binary mul %c, %we {fuser.kernel = 0 : i64}

// -----

// Must not unify: a static extent tied to no symbol of the domain ([8] vs [s0, s1]) stays a
// domain of its own.
func.func @static_extent_of_another_domain(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<8xf32>) -> (!fuser.tensor<?xf32>, !fuser.tensor<8xf32>) {
  %s = fuser.reduction sum %x dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  %e = fuser.unary exp %y : !fuser.tensor<8xf32> -> !fuser.tensor<8xf32>
  func.return %s, %e : !fuser.tensor<?xf32>, !fuser.tensor<8xf32>
}
// CHECK-LABEL: func.func @static_extent_of_another_domain
// CHECK-SAME:    {name = "fuser_kernel_1_pointwise", scheduler = "pointwise", reason = "split before fuser.unary: output [8] is not shaped like the reduction domain [s0, s1]"}

// -----

// A segment whose ops its consumer recomputes (exp y, cheap and input-only) writes nothing:
// it is not planned at all (it was an empty pointwise kernel launched with an empty grid).
// Every kernel listed computes an op.
func.func @recomputed_segment_is_not_planned(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?x?xf32>) -> (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) {
  %s = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xbxf32>
  %o = fuser.binary sub %x, %s : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %e = fuser.unary exp %y : !fuser.tensor<?x?xf32> -> !fuser.tensor<?x?xf32>
  %c = fuser.reduction sum %o dims [0] keepdim : !fuser.tensor<?x?xf32> -> !fuser.tensor<bx?xf32>
  %g = fuser.binary mul %e, %c : (!fuser.tensor<?x?xf32>, !fuser.tensor<bx?xf32>) -> !fuser.tensor<?x?xf32>
  func.return %o, %g : !fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>
}
// CHECK-LABEL: func.func @recomputed_segment_is_not_planned
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_inner_persistent"{{[^}]*}}}, {name = "fuser_kernel_1_reduction"{{[^}]*}}}, {name = "fuser_kernel_2_pointwise"{{[^}]*}}}]
// CHECK:         fuser.reduction sum %x dims [1] keepdim {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.binary sub %x, %s {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.unary exp %y {fuser.kernel = 2 : i64}
// CHECK-NEXT:    fuser.reduction sum %o dims [0] keepdim {fuser.kernel = 1 : i64}
// CHECK-NEXT:    fuser.binary mul %e, %c {fuser.kernel = 2 : i64}

// -----

// A per-row value of the whole-tensor reduction's domain would be stored by every lane along the
// row (a [?, b] output in a loop over [?, ?]): refused, with the reason; it gets a kernel of its
// own when no earlier kernel takes it.
func.func @total_with_a_per_row_output(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?xbxf32>) -> (!fuser.tensor<f32>, !fuser.tensor<?xbxf32>) {
  %p = fuser.binary mul %x, %y : (!fuser.tensor<?x?xf32>, !fuser.tensor<?xbxf32>) -> !fuser.tensor<?x?xf32>
  %t = fuser.reduction sum %p dims [0, 1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<f32>
  %two = arith.constant 2.000000e+00 : f64
  %m = fuser.binary mul %y, %two : (!fuser.tensor<?xbxf32>, f64) -> !fuser.tensor<?xbxf32>
  func.return %t, %m : !fuser.tensor<f32>, !fuser.tensor<?xbxf32>
}
// CHECK-LABEL: func.func @total_with_a_per_row_output
// CHECK-SAME:    {name = "fuser_kernel_1_pointwise", scheduler = "pointwise", reason = "split before fuser.binary: output [s0, b] is broadcast in a reduced dim of [s0, s1]: every lane along it would store it again"}
// CHECK:         fuser.reduction sum %p dims [0, 1] {fuser.kernel = 0 : i64}
// CHECK:         fuser.binary mul %y, %two {fuser.kernel = 1 : i64}

// -----

// Where an earlier kernel takes it, a value the current kernel refuses goes there: the row
// sum's per-row mean, computed after the whole-tensor sum (GPT-2's layer norm and loss), is
// written by the row kernel once a row; a per-row value of an input alone (its own component)
// joins it too (static extents: the fusion knows its rows are the row kernel's). Two kernels,
// not four.
func.func @per_row_values_join_the_row_kernel(%x: !fuser.tensor<8x768xf32>, %y: !fuser.tensor<8xbxf32>) -> (!fuser.tensor<8xbxf32>, !fuser.tensor<f32>, !fuser.tensor<8xbxf32>, !fuser.tensor<8xbxf32>) {
  %s = fuser.reduction sum %x dims [1] keepdim : !fuser.tensor<8x768xf32> -> !fuser.tensor<8xbxf32>
  %t = fuser.reduction sum %x dims [0, 1] : !fuser.tensor<8x768xf32> -> !fuser.tensor<f32>
  %c = arith.constant 7.680000e+02 : f64
  %m = fuser.binary div %s, %c : (!fuser.tensor<8xbxf32>, f64) -> !fuser.tensor<8xbxf32>
  %n = fuser.binary div %y, %c : (!fuser.tensor<8xbxf32>, f64) -> !fuser.tensor<8xbxf32>
  func.return %s, %t, %m, %n : !fuser.tensor<8xbxf32>, !fuser.tensor<f32>, !fuser.tensor<8xbxf32>, !fuser.tensor<8xbxf32>
}
// CHECK-LABEL: func.func @per_row_values_join_the_row_kernel
// CHECK-SAME:    fuser.kernels = [{name = "fuser_kernel_0_reduction", scheduler = "reduction"}, {name = "fuser_kernel_1_reduction", scheduler = "reduction", reason = "split before fuser.reduction: reductions over different dims [1] and [0, 1]"}]
// CHECK:         fuser.reduction sum %x dims [1] keepdim {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.reduction sum %x dims [0, 1] {fuser.kernel = 1 : i64}
// CHECK:         fuser.binary div %s, %c {fuser.kernel = 0 : i64}
// CHECK-NEXT:    fuser.binary div %y, %c {fuser.kernel = 0 : i64}

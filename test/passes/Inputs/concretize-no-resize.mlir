// Input of ../concretize.mlir. No resize op: concretize must leave the fusion unchanged
// (even where an input extent is 1 at run time: a `?` dim never becomes broadcast).
func.func @no_resize(%x: !fuser.tensor<?x?xf32>, %y: !fuser.tensor<?x?xf32>) -> !fuser.tensor<?xf32> {
  %a = fuser.binary add %x, %y : (!fuser.tensor<?x?xf32>, !fuser.tensor<?x?xf32>) -> !fuser.tensor<?x?xf32>
  %n = fuser.dim %a, 1 : !fuser.tensor<?x?xf32>
  %s = fuser.reduction sum %a dims [1] : !fuser.tensor<?x?xf32> -> !fuser.tensor<?xf32>
  func.return %s : !fuser.tensor<?xf32>
}

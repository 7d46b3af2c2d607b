func.func @squeeze_non_size_1(%x: !fuser.tensor<4x?xf32>) -> !fuser.tensor<?xf32> {
  %r = fuser.squeeze %x dims [0] : !fuser.tensor<4x?xf32> -> !fuser.tensor<?xf32>
  func.return %r : !fuser.tensor<?xf32>
}

func.func @builtin_tensor_operand(%x: tensor<?xf32>) {
  %r = fuser.unary exp %x : tensor<?xf32> -> !fuser.tensor<?xf32>
  func.return
}

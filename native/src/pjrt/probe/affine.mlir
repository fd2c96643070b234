module @affine {
  func.func public @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %two = stablehlo.constant dense<2.0> : tensor<2x3xf32>
    %one = stablehlo.constant dense<1.0> : tensor<2x3xf32>
    %m = stablehlo.multiply %x, %two : tensor<2x3xf32>
    %r = stablehlo.add %m, %one : tensor<2x3xf32>
    return %r : tensor<2x3xf32>
  }
}

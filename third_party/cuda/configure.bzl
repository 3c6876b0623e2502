"""Repository rule that exposes a local CUDA toolkit to Bazel.

Creates @local_cuda with:
  :cuda_headers  the toolkit's include directory
  :cudart        the CUDA runtime (shared)
  :cuda_driver   libcuda (stub when no driver is installed)
  :nvrtc         the runtime compiler
  :nvcc          the compiler binary, for genrules
and a `defs.bzl` with CUDA_AVAILABLE. Without a toolkit every target is an
empty library and CUDA_AVAILABLE is False.
"""

def _cuda_configure_impl(ctx):
    cuda_path = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    disabled = ctx.os.environ.get("WEFT_DISABLE_CUDA", "") == "1"
    found = (not disabled) and ctx.path(cuda_path + "/include/cuda_runtime.h").exists
    if found:
        ctx.symlink(cuda_path + "/include", "include")
        ctx.symlink(cuda_path + "/lib64", "lib64")
        ctx.symlink(cuda_path + "/bin", "bin")
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.inl"]),
    includes = ["include"],
)

cc_library(
    name = "cudart",
    linkopts = ["-L{path}/lib64", "-Wl,-rpath,{path}/lib64", "-lcudart"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "cuda_driver",
    linkopts = ["-L{path}/lib64/stubs", "-lcuda"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "nvrtc",
    linkopts = ["-L{path}/lib64", "-Wl,-rpath,{path}/lib64", "-lnvrtc"],
    deps = [":cuda_headers"],
)

filegroup(
    name = "nvcc",
    srcs = ["bin/nvcc"],
)
""".format(path = cuda_path))
    else:
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda_headers")
cc_library(name = "cudart")
cc_library(name = "cuda_driver")
cc_library(name = "nvrtc")
filegroup(name = "nvcc")
""")
    ctx.file("defs.bzl", "CUDA_AVAILABLE = %s\nCUDA_PATH = %r\n" % (found, cuda_path))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "WEFT_DISABLE_CUDA"],
    local = True,
)

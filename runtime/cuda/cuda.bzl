"""Compiling CUDA sources with the toolkit's nvcc.

cuda_kernel_library compiles .cu files with nvcc (through a genrule, using the
toolkit found by //third_party/cuda:configure.bzl) into a static library and
wraps it in a cc_library with the given plain C++ headers, so ordinary
cc_library/cc_binary targets can depend on kernels. Without a toolkit the
cc_library holds only the headers and is tagged manual.
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE")

# Native code for A100 (sm_80) and H100/H200 (sm_90), plus compute_90 PTX so
# newer GPUs can JIT-compile the kernels.
CUDA_GENCODE = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

CUDA_COPTS = [
    "-std=c++17",
    "-O3",
    "-Xcompiler",
    "-fPIC",
    "-I.",
]

def cuda_kernel_library(
        name,
        srcs,
        hdrs,
        cu_hdrs = [],
        deps = [],
        visibility = None,
        tags = []):
    """A cc_library whose code is `srcs` (.cu files) compiled by nvcc.

    Args:
      name: the cc_library's name.
      srcs: .cu files.
      hdrs: plain C++ headers that declare the host-side entry points.
      cu_hdrs: further headers (of this package) the .cu files include.
      deps: cc deps of the compiled code (their headers are not seen by
        nvcc beyond the system include path and `cu_hdrs`).
      visibility: of the cc_library.
      tags: of both targets.
    """
    if not CUDA_AVAILABLE:
        native.cc_library(
            name = name,
            hdrs = hdrs,
            deps = deps,
            visibility = visibility,
            tags = tags + ["manual"],
        )
        return

    archive = "lib%s_nvcc.a" % name
    objdir = "$(@D)/_%s_objs" % name

    # nvcc locates its own installation from its real path, so the symlink
    # from the external repository is resolved first.
    cmd = [
        "NVCC=$$(readlink -f $(location @local_cuda//:nvcc))",
        "rm -rf %s" % objdir,
        "mkdir -p %s" % objdir,
    ]
    objs = []
    for i, src in enumerate(srcs):
        obj = "%s/%d.o" % (objdir, i)
        objs.append(obj)
        cmd.append("$$NVCC %s -c $(location %s) -o %s" % (
            " ".join(CUDA_COPTS + CUDA_GENCODE),
            src,
            obj,
        ))
    cmd.append("$$NVCC -lib -o $@ %s" % " ".join(objs))

    native.genrule(
        name = name + "_nvcc",
        srcs = srcs + hdrs + cu_hdrs,
        outs = [archive],
        tools = ["@local_cuda//:nvcc"],
        cmd = " && ".join(cmd),
        message = "Compiling CUDA kernels for %s" % name,
        tags = tags,
    )

    native.cc_library(
        name = name,
        srcs = [archive],
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        visibility = visibility,
        tags = tags,
    )

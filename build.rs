//! Link-time set-up that the dependencies leave to the final binary.
//!
//! - ALE (through ale-sys) is C++ compiled into a static library, so whoever links it
//!   must also link the C++ runtime.
//! - torch-sys links libtorch dynamically but embeds no search path in our binaries;
//!   an rpath to the libtorch it built against lets `target/release/a3g` and the test
//!   binaries start without LD_LIBRARY_PATH.
//! - torch-sys asks for libtorch_cuda, but nothing in a3g calls into it (CUDA kernels
//!   register themselves when it loads), so the linker's --as-needed drops it and
//!   every CUDA device looks absent. It is kept as a NEEDED library here.
//! - Training across machines goes through c10d (src/distributed/c10d_shim.cpp), whose
//!   ProcessGroupGloo.hpp includes gloo's own headers, which the torch wheel lacks.
//!   When set-up found them (Debian's libgloo-dev, unpacked into .deps/gloo), the shim
//!   is compiled against libtorch's headers and `cfg(a3g_c10d)` is set; without them
//!   a3g builds for one machine. With the CUDA wheel and the CUDA headers set-up
//!   fetches besides (crt/ and cccl/, which the wheel lacks), the shim is compiled
//!   with ProcessGroupNCCL too and `cfg(a3g_nccl)` is set, for ranks with GPUs.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rustc-check-cfg=cfg(a3g_c10d)");
    println!("cargo:rustc-check-cfg=cfg(a3g_nccl)");
    println!("cargo:rustc-check-cfg=cfg(a3g_elu)");
    println!("cargo:rustc-link-lib=stdc++");
    // torch-sys declares `links = "tch"` and exports the folder it linked against.
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Ok(libtorch_lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        // --disable-new-dtags writes RPATH rather than RUNPATH: RPATH is searched before
        // LD_LIBRARY_PATH, so another libtorch there cannot be picked up by accident,
        // while a binary whose checkout moved still falls back to LD_LIBRARY_PATH.
        println!("cargo:rustc-link-arg=-Wl,--disable-new-dtags,-rpath,{libtorch_lib}");
        // A CPU-only libtorch has no libtorch_cuda; a3g then runs on the CPU alone.
        // libtorch_cuda loads without a driver (the CUDA runtime opens libcuda.so.1
        // only when asked for a device), so linking it costs a CPU machine nothing
        // but start-up time.
        if Path::new(&libtorch_lib).join("libtorch_cuda.so").exists() {
            println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
        }
        compile_elu_kernel(Path::new(&libtorch_lib));
        compile_autocast(Path::new(&libtorch_lib));
        if let Some(gloo_include) = gloo_include() {
            compile_c10d_shim(Path::new(&libtorch_lib), &gloo_include);
        }
    }
}

/// a3g's ELU kernel (src/model/elu.cpp), against libtorch's own headers, which every
/// libtorch has; on other architectures than x86-64, or where it does not compile,
/// a3g uses libtorch's ELU (src/model/elu.rs).
fn compile_elu_kernel(libtorch_lib: &Path) {
    let kernel = "src/model/elu.cpp";
    println!("cargo:rerun-if-changed={kernel}");
    // The kernel is AVX2 code; other architectures keep libtorch's ELU.
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        return;
    }
    let include = libtorch_lib.join("../include");
    let compiled = cc::Build::new()
        .cpp(true)
        .file(kernel)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .std("c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .warnings(false)
        .try_compile("a3g_elu");
    match compiled {
        Ok(()) => println!("cargo:rustc-cfg=a3g_elu"),
        Err(error) => println!(
            "cargo:warning=a3g's ELU kernel did not compile ({error}); the universe network uses \
             libtorch's ELU"
        ),
    }
}

/// The autocast regions of `--precision bf16` (src/autocast.cpp), against libtorch's
/// own headers, which every libtorch has: a build without them has no bf16 passes.
fn compile_autocast(libtorch_lib: &Path) {
    let source = "src/autocast.cpp";
    println!("cargo:rerun-if-changed={source}");
    let include = libtorch_lib.join("../include");
    cc::Build::new()
        .cpp(true)
        .file(source)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .std("c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .warnings(false)
        .compile("a3g_autocast");
}

/// Gloo's headers: `A3G_GLOO_INCLUDE`, which set-up exports, else where set-up puts
/// them, so that a plain `cargo build` in a set-up checkout finds them too.
fn gloo_include() -> Option<PathBuf> {
    println!("cargo:rerun-if-env-changed=A3G_GLOO_INCLUDE");
    let unpacked = Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/gloo/root/usr/include");
    // Only a path that exists: cargo reruns a build script whose watched path is
    // missing on every build.
    if unpacked.exists() {
        println!("cargo:rerun-if-changed={}", unpacked.display());
    }
    std::env::var_os("A3G_GLOO_INCLUDE")
        .map(PathBuf::from)
        .or(Some(unpacked))
        .filter(|dir| dir.join("gloo/config.h").exists())
}

/// CUDA's headers for c10d's ProcessGroupNCCL.hpp, when every one is here: the CUDA
/// runtime's and NCCL's from the wheel's nvidia/ packages beside libtorch, crt/ and
/// cccl/ from `A3G_CUDA_INCLUDE` (set-up's .deps/cuda-headers). None for a CPU-only
/// libtorch or a libtorch without them: the shim is then built with Gloo alone.
fn cuda_includes(libtorch_lib: &Path) -> Option<Vec<PathBuf>> {
    println!("cargo:rerun-if-env-changed=A3G_CUDA_INCLUDE");
    let nvidia = libtorch_lib.join("../../nvidia");
    let fetched =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".deps/cuda-headers/nvidia/cu13/include");
    let support = std::env::var_os("A3G_CUDA_INCLUDE").map(PathBuf::from).unwrap_or(fetched);
    if support.exists() {
        println!("cargo:rerun-if-changed={}", support.display());
    }
    let (runtime, cccl, nccl) =
        (nvidia.join("cu13/include"), support.join("cccl"), nvidia.join("nccl/include"));
    let needed = [
        libtorch_lib.join("libtorch_cuda.so"),
        libtorch_lib.join("../include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp"),
        runtime.join("cuda_runtime.h"),
        support.join("crt/host_config.h"),
        cccl.join("cuda/std/version"),
        nccl.join("nccl.h"),
    ];
    needed.iter().all(|path| path.exists()).then(|| vec![runtime, support, cccl, nccl])
}

fn compile_c10d_shim(libtorch_lib: &Path, gloo_include: &Path) {
    let shim = "src/distributed/c10d_shim.cpp";
    println!("cargo:rerun-if-changed={shim}");
    let include = libtorch_lib.join("../include");
    if !include.join("torch/csrc/distributed/c10d/ProcessGroupGloo.hpp").exists() {
        return;
    }
    let build = |cuda: Option<&[PathBuf]>| {
        let mut build = cc::Build::new();
        build
            .cpp(true)
            .file(shim)
            .include(&include)
            .include(include.join("torch/csrc/api/include"))
            .include(gloo_include)
            .std("c++17")
            // The wheel's libtorch is built with the C++11 ABI, and with Gloo (and, the
            // CUDA wheel, NCCL), whose declarations its headers only show under these
            // macros.
            .define("_GLIBCXX_USE_CXX11_ABI", "1")
            .define("USE_DISTRIBUTED", None)
            .define("USE_C10D_GLOO", None)
            // libtorch's headers warn under the compiler's defaults; the shim is small
            // enough to read whole.
            .warnings(false);
        if let Some(cuda) = cuda {
            build.includes(cuda).define("USE_C10D_NCCL", None).define("USE_CUDA", None);
        }
        build.try_compile("a3g_c10d_shim")
    };
    if let Some(cuda) = cuda_includes(libtorch_lib) {
        match build(Some(cuda.as_slice())) {
            Ok(()) => {
                println!("cargo:rustc-cfg=a3g_c10d");
                println!("cargo:rustc-cfg=a3g_nccl");
                return;
            }
            Err(error) => println!(
                "cargo:warning=the c10d shim did not compile with NCCL ({error}); ranks with GPUs will \
                 sum their models through Gloo"
            ),
        }
    }
    // Headers of another gloo than libtorch's may not compile with its
    // ProcessGroupGloo.hpp: a3g is then built for one machine, as without them.
    match build(None) {
        Ok(()) => println!("cargo:rustc-cfg=a3g_c10d"),
        Err(error) => println!(
            "cargo:warning=the c10d shim did not compile with the gloo headers in {} ({error}); \
             a3g is built without training across machines",
            gloo_include.display()
        ),
    }
}

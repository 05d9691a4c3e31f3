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

use std::path::Path;

fn main() {
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
    }
}

# Set-up shared by ./a3g and scripts/test; sourced, not run.
#
# Installs what the build needs and cannot take for granted, into .deps/ inside the
# checkout (git-ignored, nothing system-wide):
#   - libtorch 2.11.0, from the PyPI wheel torch==2.11.0 (with its CUDA libraries),
#     unless LIBTORCH or LIBTORCH_USE_PYTORCH already points at one;
#   - cmake, from PyPI's `cmake` package, only when the system has none;
#   - gloo's headers, from Debian's libgloo-dev, for training across machines
#     (docs/distributed.md); without them a3g builds for one machine;
#   - with the CUDA wheel, the CUDA compiler-support headers that c10d's NCCL header
#     includes and the wheel lacks (PyPI's nvidia-cuda-crt and nvidia-cuda-cccl), so
#     that ranks with GPUs sum their models through NCCL; without them, through Gloo;
#   - for scripts/test only, Python's tensorboard and gymnasium packages.
# Every step is skipped once done, so a warm call costs a few file tests.

A3G_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
A3G_DEPS="$A3G_ROOT/.deps"
A3G_TORCH_VERSION=2.11.0

a3g_say() { printf 'a3g: %s\n' "$*" >&2; }
a3g_fail() { printf 'a3g: error: %s\n' "$*" >&2; exit 1; }

# pip into a fresh folder, renamed into place only when complete, so an interrupted
# install is redone instead of being mistaken for a finished one. pip's progress goes
# to stderr: stdout belongs to the a3g command being run (`./a3g eval --json | jq`).
a3g_pip_install() {
    local target=$1; shift
    command -v python3 >/dev/null ||
        a3g_fail "python3 with pip is needed to fetch $*; install python3 and python3-pip, or see README.md"
    python3 -m pip --version >/dev/null 2>&1 ||
        a3g_fail "pip is missing for python3; install python3-pip (Debian) or run 'python3 -m ensurepip'"
    rm -rf "$target.partial"
    mkdir -p "$A3G_DEPS"
    python3 -m pip install --disable-pip-version-check --no-input --root-user-action=ignore \
        --progress-bar on --target "$target.partial" "$@" >&2 ||
        a3g_fail "pip could not install $*; check the network and the disk space, then run again"
    rm -rf "$target"
    mv "$target.partial" "$target"
}

a3g_ensure_libtorch() {
    if [[ -n ${LIBTORCH:-} ]]; then
        [[ -e $LIBTORCH/lib/libtorch_cpu.so ]] ||
            a3g_fail "LIBTORCH=$LIBTORCH has no lib/libtorch_cpu.so; point it at a libtorch $A3G_TORCH_VERSION folder or unset it"
        return
    fi
    [[ -n ${LIBTORCH_USE_PYTORCH:-} ]] && return
    local torch_dir="$A3G_DEPS/torch"
    if [[ ! -e $torch_dir/.a3g-torch-$A3G_TORCH_VERSION ]]; then
        a3g_say "installing libtorch $A3G_TORCH_VERSION: PyPI wheel torch==$A3G_TORCH_VERSION and its CUDA libraries"
        a3g_say "  into $torch_dir (about 1 GB download, 4.6 GB on disk, 1-3 minutes)"
        a3g_pip_install "$torch_dir" "torch==$A3G_TORCH_VERSION"
        touch "$torch_dir/.a3g-torch-$A3G_TORCH_VERSION"
        a3g_say "libtorch installed"
    fi
    export LIBTORCH="$torch_dir/torch"
}

a3g_ensure_cmake() {
    # ALE 0.6 declares cmake_minimum_required(2.6), which cmake 4 refuses unless told
    # the oldest policy level it may assume; older cmake ignores this variable.
    export CMAKE_POLICY_VERSION_MINIMUM=3.5
    command -v cmake >/dev/null && return
    local cmake_dir="$A3G_DEPS/cmake"
    if [[ ! -x $cmake_dir/cmake/data/bin/cmake ]]; then
        a3g_say "installing cmake (needed to build the ALE emulator): PyPI package cmake"
        a3g_say "  into $cmake_dir (about 30 MB download, under a minute)"
        a3g_pip_install "$cmake_dir" cmake
    fi
    export PATH="$cmake_dir/cmake/data/bin:$PATH"
}

# A Python package pinned to a version, installed once into .deps/NAME (marked done
# for that version): a3g_ensure_python_package NAME VERSION REQUIREMENTS WHY SIZE, where
# REQUIREMENTS is pip's arguments separated by spaces ("--no-deps a==1 b==2").
a3g_ensure_python_package() {
    local name=$1 version=$2 requirement=$3 why=$4 size=$5
    local -a pip_arguments
    read -ra pip_arguments <<<"$requirement"
    local dir="$A3G_DEPS/$name"
    if [[ ! -e $dir/.a3g-$name-$version ]]; then
        a3g_say "installing Python's ${requirement#--no-deps }, $why"
        a3g_say "  into $dir ($size)"
        a3g_pip_install "$dir" "${pip_arguments[@]}"
        touch "$dir/.a3g-$name-$version"
    fi
}

# Python's tensorboard package, for the test that reads a3g's event files back the way
# TensorBoard itself does. scripts/test installs it; ./a3g does not need it.
A3G_TENSORBOARD_VERSION=2.21.0
a3g_ensure_tensorboard_reader() {
    a3g_ensure_python_package tensorboard "$A3G_TENSORBOARD_VERSION" \
        "tensorboard==$A3G_TENSORBOARD_VERSION" "which a test reads event files back with" \
        "about 30 MB, under a minute"
}

# Gymnasium, for the tests of environments from outside a3g (`--env gym:<id>`, a
# user's class), which run it in python3 with .deps/gymnasium on PYTHONPATH. scripts/test
# installs it; ./a3g does not need it (a user's own Python brings its Gymnasium).
A3G_GYMNASIUM_VERSION=1.2.2
a3g_ensure_gymnasium() {
    a3g_ensure_python_package gymnasium "$A3G_GYMNASIUM_VERSION" \
        "gymnasium==$A3G_GYMNASIUM_VERSION" "which the tests of outside environments run" \
        "about 20 MB with numpy, under a minute"
}

# MiniGrid, the third-party package of Gymnasium environments that the tests name with
# --env-import, with the pygame it imports; without their dependencies, which
# .deps/gymnasium already holds.
A3G_MINIGRID_VERSION=3.0.0
A3G_PYGAME_VERSION=2.6.1
a3g_ensure_minigrid() {
    a3g_ensure_python_package minigrid "$A3G_MINIGRID_VERSION-pygame-$A3G_PYGAME_VERSION" \
        "--no-deps minigrid==$A3G_MINIGRID_VERSION pygame==$A3G_PYGAME_VERSION" \
        "a package of environments from outside Gymnasium the tests train" "about 40 MB, under a minute"
}

# An optional part of the set-up, which a3g builds without: `fetch` (a function) fills
# the fresh folder it is given; on success the folder becomes $dir, marked with
# $marker, and on failure $dir.unavailable is made and $note said once, so that later
# calls do not try again until it is removed. Returns 1 while the part is unavailable.
a3g_fetch_optional() {
    local dir=$1 marker=$2 note=$3 fetch=$4
    [[ -e $dir.unavailable ]] && return 1
    [[ -e $dir/$marker ]] && return 0
    rm -rf "$dir.partial"
    mkdir -p "$dir.partial"
    if "$fetch" "$dir.partial"; then
        touch "$dir.partial/$marker"
        rm -rf "$dir"
        mv "$dir.partial" "$dir"
    else
        rm -rf "$dir.partial"
        touch "$dir.unavailable"
        a3g_say "note: $note (remove $dir.unavailable to try again)"
        return 1
    fi
}

# Gloo's headers, which c10d's ProcessGroupGloo.hpp includes and the torch wheel does
# not ship: Debian's package libgloo-dev, downloaded and unpacked into .deps/gloo
# (apt-get download and dpkg-deb need no root). Where apt cannot fetch it, a3g builds
# without multi-machine training.
a3g_fetch_gloo_headers() {
    a3g_say "fetching gloo's headers for training across machines: Debian's libgloo-dev, into $A3G_DEPS/gloo"
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null &&
        (cd "$1" && apt-get download libgloo-dev >/dev/null 2>&1) &&
        dpkg-deb -x "$1"/libgloo-dev_*.deb "$1/root"
}
a3g_ensure_gloo_headers() {
    a3g_fetch_optional "$A3G_DEPS/gloo" .a3g-gloo \
        "apt could not fetch libgloo-dev; a3g builds for one machine" a3g_fetch_gloo_headers &&
        export A3G_GLOO_INCLUDE="$A3G_DEPS/gloo/root/usr/include"
    return 0
}

# c10d's ProcessGroupNCCL.hpp reaches cuda_runtime.h, which the CUDA wheel ships
# (nvidia/cu13/include) together with nccl.h, but not the crt/ and cccl headers that
# cuda_runtime.h includes: PyPI's nvidia-cuda-crt and nvidia-cuda-cccl of the wheel's
# CUDA (13.0) have them. Only for the CUDA wheel of .deps/torch: another libtorch
# (LIBTORCH) builds without NCCL, as does a machine where pip cannot fetch them.
A3G_CUDA_HEADERS_VERSION=13.0
a3g_fetch_cuda_headers() {
    a3g_say "fetching CUDA's compiler-support headers, for NCCL between ranks with GPUs: PyPI's"
    a3g_say "  nvidia-cuda-crt and nvidia-cuda-cccl $A3G_CUDA_HEADERS_VERSION, into $A3G_DEPS/cuda-headers (3 MB, seconds)"
    # Not a3g_pip_install, which fails the set-up: without them a3g still builds.
    python3 -m pip install --disable-pip-version-check --no-input --root-user-action=ignore \
        --no-deps --quiet --target "$1" \
        "nvidia-cuda-crt==$A3G_CUDA_HEADERS_VERSION.*" "nvidia-cuda-cccl==$A3G_CUDA_HEADERS_VERSION.*" >&2
}
a3g_ensure_cuda_headers() {
    [[ -e $A3G_DEPS/torch/nvidia/cu13/include/cuda_runtime.h && ${LIBTORCH:-} == "$A3G_DEPS/torch/torch" ]] || return 0
    a3g_fetch_optional "$A3G_DEPS/cuda-headers" ".a3g-cuda-headers-$A3G_CUDA_HEADERS_VERSION" \
        "pip could not fetch them; ranks with GPUs sum through Gloo" a3g_fetch_cuda_headers &&
        export A3G_CUDA_INCLUDE="$A3G_DEPS/cuda-headers/nvidia/cu13/include"
    return 0
}

a3g_ensure_toolchain() {
    command -v cargo >/dev/null ||
        a3g_fail "cargo is missing; install Rust from https://rustup.rs, then run again"
    command -v c++ >/dev/null || command -v g++ >/dev/null ||
        a3g_fail "a C++ compiler is missing (ALE and the libtorch bindings are C++); install g++ (Debian: build-essential)"
}

a3g_setup() {
    a3g_ensure_toolchain
    a3g_ensure_libtorch
    a3g_ensure_cmake
    a3g_ensure_gloo_headers
    a3g_ensure_cuda_headers
}

# Sourced by the benchmarks that run Python A3C trainers beside a3g: installs their
# Python packages into .deps/reference-python and takes each trainer's code, at a
# pinned commit, into .deps/<name>. Needs the network once (or local clones).

python_a3c_packages=(gymnasium==1.4.0 ale-py==0.12.1 opencv-python-headless==5.0.0.93 setproctitle==1.3.8)
python_a3c_deps="$A3G_DEPS/reference-python"

python_a3c_install_packages() {
    if [[ ! -e $python_a3c_deps/.a3g-installed ]]; then
        a3g_say "installing the Python trainers' packages (${python_a3c_packages[*]}) into $python_a3c_deps"
        a3g_pip_install "$python_a3c_deps" "${python_a3c_packages[@]}"
        touch "$python_a3c_deps/.a3g-installed"
    fi
}

# python_a3c_checkout NAME SOURCE COMMIT FILE... puts FILEs of repository SOURCE (a
# URL, or a local clone or mirror, bare or not) at COMMIT into $A3G_DEPS/NAME, once.
# Only the files a run needs are taken: a mirror may lack a repository's large blobs.
python_a3c_checkout() {
    local name=$1 source=$2 commit=$3
    shift 3
    local target="$A3G_DEPS/$name"
    [[ -e $target/.a3g-commit-$commit ]] && return
    if [[ ! -d $source ]]; then
        local clone="$A3G_DEPS/$name.git"
        if [[ ! -d $clone ]]; then
            a3g_say "cloning $source into $clone"
            rm -rf "$clone.partial"
            git clone --quiet --bare "$source" "$clone.partial" ||
                a3g_fail "could not clone $source; pass a local clone or mirror of it"
            mv "$clone.partial" "$clone"
        fi
        source=$clone
    fi
    rm -rf "$target.partial"
    mkdir -p "$target.partial"
    local file
    for file in "$@"; do
        git -C "$source" show "$commit:$file" >"$target.partial/$file" ||
            a3g_fail "$source has no $file at commit $commit of $name; pass a clone that has it"
    done
    touch "$target.partial/.a3g-commit-$commit"
    rm -rf "$target"
    mv "$target.partial" "$target"
}

# The last commits of the two repositories, so that every run measures the same code.
rl_a3c_pytorch_commit=4170f7d94852129dc70265648c219e6b412965be # 2023-04-18
rl_a3c_pytorch_files=(main.py train.py test.py model.py player_util.py shared_optim.py environment.py utils.py config.json)
pytorch_a3c_commit=48d95844755e2c3e2c7e48bbd1a7141f7212b63f # 2019-03-20
pytorch_a3c_files=(main.py train.py test.py model.py my_optim.py envs.py)

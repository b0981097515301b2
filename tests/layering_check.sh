#!/usr/bin/env bash
# CTest "layering": a folder includes only the folders above it in docs/architecture.md's
# picture. The order lives in that picture and nowhere else: each of its lines that begins
# with folder names (`core/`, `netem/  sysctl/  probes/`) is one row, top to bottom. Fails,
# naming file:line and the include, when a source file of a folder includes a header of a
# folder on its own row or below it, or reaches another folder with "../". Also fails when
# the picture leaves out a library folder (a top-level folder whose CMakeLists.txt declares a
# library), or when the README's folder table, the top CMakeLists.txt's add_subdirectory
# calls or architecture.md's "The folders" section list the folders in another order.
# Usage: layering_check.sh SOURCE_DIR
set -u
cd "${1:?usage: layering_check.sh SOURCE_DIR}" || exit 1
doc=docs/architecture.md
failures=()
fail() { failures+=("$1"); }

# The picture: the first fenced block after "in this picture:"; a row is the run of `name/`
# words that begins a line.
declare -A row_of=()
order=()
rows=0
while IFS= read -r line; do
    read -ra words <<<"$line"
    found=0
    for w in "${words[@]}"; do
        [[ $w =~ ^([a-z_]+)/$ ]] || break
        row_of[${BASH_REMATCH[1]}]=$rows
        order+=("${BASH_REMATCH[1]}")
        found=1
    done
    ((found)) && ((rows++))
done < <(awk '/in this picture:/ { want = 1; next }
              want && /^```/ { if (inside) exit; inside = 1; next }
              inside { print }' "$doc")
((rows > 1)) || { echo "FAIL: no folder picture found in $doc (a fenced block after \"in this picture:\")"; exit 1; }

for f in "${order[@]}"; do
    [[ -f $f/CMakeLists.txt ]] || fail "$doc: the picture draws $f/, which is not a folder with a CMakeLists.txt"
done
for cm in */CMakeLists.txt; do
    f=${cm%/CMakeLists.txt}
    [[ $f != tests && $f != bench ]] || continue  # they test and measure the stages
    grep -q '^[[:space:]]*add_library(' "$cm" || continue
    [[ -n ${row_of[$f]+x} ]] || fail "$doc: the picture leaves out $f/ (its CMakeLists.txt declares a library)"
done

# A list of folders agrees with the picture when it names each drawn folder once, rows in
# the picture's order (folders of one row in any order among themselves).
check_order() {  # WHERE FOLDER...
    local where=$1 prev=-1 f r
    shift
    declare -A seen=()
    for f in "$@"; do
        [[ -n ${row_of[$f]+x} ]] || continue
        r=${row_of[$f]}
        ((r >= prev)) || fail "$where: $f/ comes after folders the picture draws below it (order: ${order[*]})"
        prev=$r seen[$f]=1
    done
    for f in "${order[@]}"; do
        [[ -n ${seen[$f]+x} ]] || fail "$where: $f/ is missing"
    done
}
mapfile -t readme < <(sed -nE 's/^\| `([a-z_]+)\/` \|.*/\1/p' README.md)
check_order "README.md's folder table" "${readme[@]}"
mapfile -t cmake < <(sed -nE 's/^add_subdirectory\(([a-z_]+)\).*/\1/p' CMakeLists.txt)
check_order "CMakeLists.txt's add_subdirectory calls" "${cmake[@]}"
mapfile -t sections < <(sed -nE 's/^\*\*([a-z_]+)\/\*\* .*/\1/p' "$doc")
check_order "$doc's \"The folders\" section" "${sections[@]}"

# The includes: every #include of a drawn folder's header from another drawn folder.
edges=0
for f in "${order[@]}"; do
    while IFS= read -r hit; do
        file=${hit%%:*} rest=${hit#*:}
        lineno=${rest%%:*} text=${rest#*:}
        text=${text#"${text%%[![:space:]]*}"}
        where="$file:$lineno"
        if [[ $text =~ \"[^\"]*\.\./ ]]; then
            fail "$where: $f/ includes through \"../\" ($text); name the folder instead"
            continue
        fi
        [[ $text =~ ^#[[:space:]]*include[[:space:]]*[\"\<]([a-z_]+)/ ]] || continue
        to=${BASH_REMATCH[1]}
        [[ $to != "$f" && -n ${row_of[$to]+x} ]] || continue
        ((edges++))
        if ((row_of[$to] == row_of[$f])); then
            fail "$where: $f/ includes $to/ ($text), which is on its own row of the picture"
        elif ((row_of[$to] > row_of[$f])); then
            fail "$where: $f/ includes $to/ ($text), which the picture draws below it"
        fi
    done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include' "$f" --include='*.h' --include='*.cpp' --include='*.in')
done

if ((${#failures[@]})); then
    echo "FAIL: the layering of docs/architecture.md's picture (${order[*]}) does not hold:"
    printf '%s\n' "${failures[@]}"
    exit 1
fi
echo "PASS: ${#order[@]} folders in $rows rows (${order[*]}); $edges includes of another folder's header, each of a folder above"

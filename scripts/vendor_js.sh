#!/usr/bin/env bash
# Re-fetch the vendored JavaScript from the npm registry (versions as in book/_static/vendor/README.md).
# Only needed to upgrade them: the committed copies are what the site uses.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null && npm install --silent requirejs@2.3.8 @jupyter-widgets/html-manager@1.0.15 mathjax@3.2.2 reveal.js@5.2.1)
n=$tmp/node_modules; v=$root/book/_static/vendor
mkdir -p "$v/html-manager" "$v/mathjax/output/chtml/fonts"
cp "$n/requirejs/require.js" "$v/require.js"
cp "$n/@jupyter-widgets/html-manager/dist/embed-amd.js" "$n"/@jupyter-widgets/html-manager/dist/*.woff2 "$v/html-manager/"
# MathJax from its parts (no menu, no autoload): the loader config in _config.yml and the slides template names them
m=$n/mathjax/es5; rm -rf "$v/mathjax" && mkdir -p "$v/mathjax/input/tex/extensions" "$v/mathjax/output/chtml/fonts" "$v/mathjax/a11y"
cp "$m/startup.js" "$m/core.js" "$n/mathjax/LICENSE" "$v/mathjax/" && cp "$m/input/tex-base.js" "$v/mathjax/input/"
cp "$m/input/tex/extensions/ams.js" "$v/mathjax/input/tex/extensions/" && cp "$m/output/chtml.js" "$v/mathjax/output/"
cp "$m/output/chtml/fonts/tex.js" "$v/mathjax/output/chtml/fonts/" && cp "$m/a11y/assistive-mml.js" "$v/mathjax/a11y/"
rm -rf "$v/mathjax/output/chtml/fonts/woff-v2" && cp -r "$n/mathjax/es5/output/chtml/fonts/woff-v2" "$v/mathjax/output/chtml/fonts/"
r=$n/reveal.js; rv=$v/reveal.js  # slides: only what nbconvert's reveal template loads (+ the theme's woff fonts)
rm -rf "$rv" && mkdir -p "$rv/dist/theme/fonts/source-sans-pro" "$rv/plugin/notes"
cp "$r/LICENSE" "$rv/" && cp "$r/dist/reveal.js" "$r/dist/reveal.css" "$rv/dist/" && cp "$r/dist/theme/white.css" "$rv/dist/theme/"
cp "$r"/dist/theme/fonts/source-sans-pro/{source-sans-pro.css,LICENSE,*.woff} "$rv/dist/theme/fonts/source-sans-pro/"
cp "$r/plugin/notes/notes.js" "$rv/plugin/notes/"
echo "vendored into $v"

// Prints unicode_ranges.inc: node core/acc/data/unicode_ranges.gen.js > core/acc/data/unicode_ranges.inc
const ranges = (re) => { const r = []; let start = -1;
  for (let cp = 0; cp <= 0x110000; cp++) {
    const on = cp < 0x110000 && !(cp >= 0xD800 && cp <= 0xDFFF) && re.test(String.fromCodePoint(cp));
    if (on && start < 0) start = cp; if (!on && start >= 0) { r.push([start, cp - 1]); start = -1; } }
  return r; };
const hex = (x) => '0x' + x.toString(16).toUpperCase();
const table = (name, r) => {
  const items = r.map(([a, b]) => `{${hex(a)}, ${hex(b)}}`);
  const lines = []; for (let i = 0; i < items.length; i += 6) lines.push('    ' + items.slice(i, i + 6).join(', ') + ',');
  return `constexpr Range ${name}[] = {\n${lines.join('\n')}\n};\n`;
};
process.stdout.write(`// Generated: the code point ranges of the Unicode ${process.versions.unicode} general categories L (letters) and N
// (numbers), as node's regex engine reports them (\\p{L}, \\p{N}). Regenerate with
// core/acc/data/unicode_ranges.gen.js when GPT-2's classes need a newer Unicode version.
// Included by unicode.cpp only.
` + table('kLetters', ranges(/\p{L}/u)) + '\n' + table('kNumbers', ranges(/\p{N}/u)));

// Module-scope declarations: const expressions (evaluated at shader creation), an
// override with a default value (the CPU backend takes no pipeline constants, so the
// default applies), var<private> with an initializer (fresh for every invocation), and
// type aliases.

alias Word = u32;

const BASE: Word = 40u + 2u;
const TABLE = array<u32, 4>(BASE, BASE * 2u, BASE << 2u, ~BASE);
const HALF: f32 = 1.0 / 2.0;

override factor: u32 = 3u;
override enabled: bool = true;

var<private> tally: array<Word, 2> = array<Word, 2>(7u, 9u);

@group(0) @binding(0) var<storage, read_write> out: array<Word>;

@compute @workgroup_size(16)
fn module_scope(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    tally[i % 2u] += i;
    var r = TABLE[i % 4u] * factor + tally[0] * 100u + tally[1] * 10000u;
    if enabled {
        r += u32(HALF * 4.0);
    }
    out[i] = r;
}

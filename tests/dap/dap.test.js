// `nac dap` driven by @vscode/debugadapter-testsupport's DebugClient.
// Run by tests/dap/test_dap_node.py, which compiles the fixtures and names them in
// NAC_DAP_FIXTURES (a JSON file) and the `nac` command in NAC_BIN.
'use strict';

const assert = require('assert');
const fs = require('fs');
const path = require('path');
const cp = require('child_process');
const { DebugClient } = require('@vscode/debugadapter-testsupport');

const F = JSON.parse(fs.readFileSync(process.env.NAC_DAP_FIXTURES, 'utf8'));
const NAC = process.env.NAC_BIN;
const SRC = F.source;
const L = F.lines;

function client() {
	const dc = new DebugClient(NAC, 'dap', 'nac', { env: process.env }, true);
	dc.defaultTimeout = 120000;
	return dc;
}

// An .npy file's float32 data (little-endian, C order): enough of the format for the corpus' arrays.
function readNpyF32(file) {
	const buf = fs.readFileSync(file);
	const headerLen = buf.readUInt16LE(8);
	const header = buf.slice(10, 10 + headerLen).toString('latin1');
	assert.ok(header.includes("'<f4'"), `expected float32 in ${file}: ${header}`);
	const data = buf.slice(10 + headerLen);
	return new Float32Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.length));
}

function f32(base64) {
	const b = Buffer.from(base64, 'base64');
	return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
}

// DebugClient has no readMemory helper: the request as DAP names it
async function readMemory(dc, args) {
	return dc.customRequest('readMemory', args);
}

async function top(dc) {
	const st = await dc.stackTraceRequest({ threadId: 1 });
	return st.body.stackFrames[0];
}

async function tickOf(dc) {
	return Number((await top(dc)).instructionPointerReference);
}

// initialize, launch, configure, configurationDone; resolves with the first 'stopped' event
// (listened for from the start: it can come right after configurationDone's response)
async function start(dc, launch, configure) {
	const [, , stopped] = await Promise.all([
		dc.waitForEvent('initialized').then(async () => {
			if (configure) { await configure(); }
			return dc.configurationDoneRequest();
		}),
		dc.launch(launch),
		dc.waitForEvent('stopped'),
	]);
	return stopped;
}

// an action and the 'stopped' event it causes
async function act(dc, request) {
	const [, stopped] = await Promise.all([request, dc.waitForEvent('stopped')]);
	return stopped;
}

async function expectError(promise, pattern) {
	let failed = null;
	try {
		await promise;
	} catch (e) {
		failed = e;
	}
	assert.ok(failed, `expected an error response matching ${pattern}`);
	assert.match(failed.message, pattern);
}

async function scopeVars(dc, scopeName, extra) {
	const frame = await top(dc);
	const scopes = (await dc.scopesRequest({ frameId: frame.id })).body.scopes;
	const scope = scopes.find(s => s.name === scopeName);
	assert.ok(scope, `no scope ${scopeName} among ${scopes.map(s => s.name)}`);
	return (await dc.variablesRequest(Object.assign({ variablesReference: scope.variablesReference }, extra || {}))).body.variables;
}

describe('nac dap', function () {
	let dc;
	beforeEach(() => { dc = client(); return dc.start(); });
	afterEach(() => (dc.disconnected ? undefined : dc.stop()));

	describe('launch', function () {
		it('runs a corpus file on a given input, stops at an instruction breakpoint, and its bytes are the expected output', async () => {
			const expected = readNpyF32(F.corpusExpected);
			const entry = await start(dc, { program: F.corpus, inputs: { x: F.corpusFeed }, stopOnEntry: true });
			assert.strictEqual(entry.body.reason, 'entry');
			// no source map: one frame, in the disassembly
			const frame = await top(dc);
			assert.strictEqual(frame.source.sourceReference, 1);
			assert.match(frame.source.name, /cnn\.nac \(disassembly\)/);
			const src = await dc.sourceRequest({ sourceReference: 1, source: frame.source });
			const lines = src.body.content.trimEnd().split('\n');
			const ret = lines[lines.length - 1].match(/^v(\d+) = return v(\d+)/);
			assert.ok(ret, lines[lines.length - 1]);
			const outTick = Number(ret[2]);
			const bps = await dc.customRequest('setInstructionBreakpoints', { breakpoints: [{ instructionReference: String(outTick) }] });
			assert.strictEqual(bps.body.breakpoints[0].verified, true);
			const stop = await act(dc, dc.continueRequest({ threadId: 1 }));
			assert.strictEqual(stop.body.reason, 'breakpoint');
			assert.strictEqual(await tickOf(dc), outTick);
			const ev = await dc.evaluateRequest({ expression: `v${outTick}`, context: 'watch' });
			assert.strictEqual(ev.body.memoryReference, `t${outTick}`);
			const mem = await readMemory(dc, { memoryReference: ev.body.memoryReference, count: 1 << 20 });
			const got = f32(mem.body.data);
			assert.strictEqual(got.length, expected.length);
			for (let i = 0; i < got.length; i++) {
				assert.ok(Math.abs(got[i] - expected[i]) <= 1e-4 * (1 + Math.abs(expected[i])), `output[${i}]: ${got[i]} vs ${expected[i]}`);
			}
			const outputs = [];
			dc.on('output', e => outputs.push(e.body.output));
			await Promise.all([dc.continueRequest({ threadId: 1 }), dc.waitForEvent('terminated')]);
			assert.ok(outputs.some(o => /^output 0: f32\[1,10\]/.test(o)), outputs.join(''));
		});

		it('uses the input signature when no inputs are given, and stops at a line of the model\'s .py', async () => {
			await dc.hitBreakpoint({ program: F.model }, { path: SRC, line: L.softmax });
			const st = (await dc.stackTraceRequest({ threadId: 1 })).body.stackFrames;
			assert.strictEqual(st[0].name, 'head.proj (aten.linear.default)');
			assert.strictEqual(st[0].line, L.softmax);
			assert.strictEqual(st[1].name, 'Net.forward');
			assert.strictEqual(st[1].line, L['head-call']);
			assert.strictEqual(path.resolve(st[1].source.path), path.resolve(SRC));
			// the same line has the softmax too: continuing stops there next
			await Promise.all([dc.continueRequest({ threadId: 1 }), dc.assertStoppedLocation('breakpoint', { path: SRC, line: L.softmax })]);
			assert.strictEqual((await top(dc)).name, 'head (aten.softmax.int)');
		});

		it('fails the launch of a file without an input signature with the command line\'s message', async () => {
			await expectError(dc.launch({ program: F.corpus }), /input value\(s\) missing.*records no input signature/s);
		});

		it('refuses a missing file, a truncated file, noise and a wrong-shaped input with a message', async () => {
			await expectError(dc.launch({ program: path.join(path.dirname(F.model), 'absent.nac') }), /no such file/);
			await expectError(dc.launchRequest({ program: F.truncated }), /truncated\.nac: .*(offset|byte|section|truncat)/i);
			await expectError(dc.launchRequest({ program: F.noise }), /noise\.nac: /);
			await expectError(dc.launchRequest({ program: F.model, inputs: { x: '3x6:float32' } }), /expects 2x6 float32, got 3x6/);
			await expectError(dc.launchRequest({ program: F.model, inputs: { nope: '2x6:float32' } }), /unknown input name.*'nope'/);
			// and the adapter is still there: a good launch works after them
			assert.strictEqual((await start(dc, { program: F.model, stopOnEntry: true })).body.reason, 'entry');
		});

		it('debugs a quantised file: parameters are paged and load when expanded', async () => {
			await dc.hitBreakpoint({ program: F.quant }, { path: SRC, line: L.body });
			const frame = await top(dc);
			const scopes = (await dc.scopesRequest({ frameId: frame.id })).body.scopes;
			const params = scopes.find(s => s.name === 'Parameters');
			assert.strictEqual(params.indexedVariables, 4);
			const page = (await dc.variablesRequest({ variablesReference: params.variablesReference, filter: 'indexed', start: 2, count: 2 })).body.variables;
			assert.deepStrictEqual(page.map(v => v.name), ['head.proj.weight', 'head.proj.bias']);
			const loaded = (await dc.variablesRequest({ variablesReference: page[0].variablesReference })).body.variables;
			assert.match(loaded[0].value, /^f32\[4,8\] min -?[\d.e-]+ max [\d.e-]+ mean -?[\d.e-]+ NaN 0/);
		});
	});

	describe('stopped at a breakpoint', function () {
		it('shows scopes and a tensor with its summary, paged children and raw bytes', async () => {
			await dc.hitBreakpoint({ program: F.model }, { path: SRC, line: L.softmax });
			const frame = await top(dc);
			const scopes = (await dc.scopesRequest({ frameId: frame.id })).body.scopes.map(s => s.name);
			assert.deepStrictEqual(scopes, ['This tick', 'Live values', 'Inputs', 'Parameters']);
			const vars = await scopeVars(dc, 'This tick');
			const t = Number(frame.instructionPointerReference);
			const result = vars.find(v => v.name === `v${t}`);
			assert.match(result.value, /^f32\[2,4\] min -?[\d.e-]+ max -?[\d.e-]+ mean -?[\d.e-]+ NaN 0 +\(result\)$/);
			assert.strictEqual(result.indexedVariables, 2);
			assert.strictEqual(vars.length, 4);            // three arguments (x, weight, bias) and the result
			const named = (await dc.variablesRequest({ variablesReference: result.variablesReference, filter: 'named' })).body.variables;
			assert.deepStrictEqual(named.map(v => v.name), ['shape', 'dtype', 'stats']);
			assert.strictEqual(named[0].value, '[2, 4]');
			const row1 = (await dc.variablesRequest({ variablesReference: result.variablesReference, filter: 'indexed', start: 1, count: 1 })).body.variables;
			assert.deepStrictEqual(row1.map(v => v.name), ['[1]']);
			const elems = (await dc.variablesRequest({ variablesReference: row1[0].variablesReference, filter: 'indexed', start: 0, count: 4 })).body.variables;
			assert.strictEqual(elems.length, 4);
			const mem = await readMemory(dc, { memoryReference: result.memoryReference, count: 64 });
			const bytes = f32(mem.body.data);
			assert.strictEqual(bytes.length, 8);
			assert.strictEqual(mem.body.unreadableBytes, 32);
			elems.forEach((e, j) => assert.ok(Math.abs(Number(e.value) - bytes[4 + j]) <= 1e-5 * (1 + Math.abs(bytes[4 + j])), `${e.value} vs ${bytes[4 + j]}`));
			// watch and hover contexts
			const w = await dc.evaluateRequest({ expression: `max(abs(v${t}))`, context: 'watch', frameId: frame.id });
			const maxAbs = Math.max(...Array.from(bytes).map(Math.abs));
			assert.ok(Math.abs(Number(w.body.result) - maxAbs) < 1e-5, `${w.body.result} vs ${maxAbs}`);
			const h = await dc.evaluateRequest({ expression: `v${t}`, context: 'hover', frameId: frame.id });
			assert.match(h.body.result, /^f32\[2,4\]/);
			assert.strictEqual(h.body.memoryReference, `t${t}`);
			const p = await dc.evaluateRequest({ expression: 'mean(head.proj.weight)', context: 'repl' });
			assert.ok(Number.isFinite(Number(p.body.result)));
			await expectError(dc.evaluateRequest({ expression: 'max(', context: 'watch' }), /./);
			await expectError(dc.evaluateRequest({ expression: 'nosuch.param + 1', context: 'hover' }), /./);
			// inputs and live values
			const inputs = await scopeVars(dc, 'Inputs');
			assert.match(inputs[0].value, /^f32\[2,6\]/);
			const live = await scopeVars(dc, 'Live values');
			assert.ok(live.length >= 1 && live.every(v => /^v\d+$/.test(v.name)), JSON.stringify(live));
		});

		it('stops with an exception on NaN, at the log that makes it', async () => {
			const stop = await start(dc, { program: F.model }, () => dc.setExceptionBreakpointsRequest({ filters: ['nan'] }));
			assert.strictEqual(stop.body.reason, 'exception');
			const info = await dc.exceptionInfoRequest({ threadId: 1 });
			assert.strictEqual(info.body.exceptionId, 'NaN');
			assert.match(info.body.description, /^NaN at tick \d+ in aten\.log/);
			const frame = await top(dc);
			assert.strictEqual(frame.line, L.log);
		});

		it('steps: next, stepIn, stepOut, stepBack, reverseContinue, goto', async () => {
			await start(dc, { program: F.model, stopOnEntry: true });
			const dis = (await dc.sourceRequest({ sourceReference: 1 })).body.content.trimEnd().split('\n');
			const linear = dis.findIndex(l => /aten\.linear/.test(l));
			await Promise.all([dc.nextRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			assert.strictEqual(await tickOf(dc), 0);
			await Promise.all([dc.nextRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			assert.strictEqual(await tickOf(dc), 1);
			// stepIn: into the first module's code (the body's linear)
			await Promise.all([dc.stepInRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			assert.strictEqual(await tickOf(dc), linear);
			assert.strictEqual((await top(dc)).name, 'body (aten.linear.default)');
			// stepOut: to the first tick outside `body`
			await Promise.all([dc.stepOutRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			const out = await tickOf(dc);
			assert.ok(out > linear);
			assert.ok(!/^body[ .]/.test((await top(dc)).name), (await top(dc)).name);
			await Promise.all([dc.stepBackRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			assert.strictEqual(await tickOf(dc), out - 1);
			await Promise.all([dc.nextRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			await Promise.all([dc.nextRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			assert.strictEqual(await tickOf(dc), out + 1);
			// a breakpoint behind us: reverse-continue goes back to it
			await dc.customRequest('setInstructionBreakpoints', { breakpoints: [{ instructionReference: String(linear) }] });
			const rc = await Promise.all([dc.reverseContinueRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			assert.strictEqual(rc[1].body.reason, 'breakpoint');
			assert.strictEqual(await tickOf(dc), linear);
			// goto a source line ahead, then back to one behind
			const targets = (await dc.gotoTargetsRequest({ source: { path: SRC }, line: L.log })).body.targets;
			assert.ok(targets.length >= 1);
			const g = await Promise.all([dc.gotoRequest({ threadId: 1, targetId: targets[0].id }), dc.waitForEvent('stopped')]);
			assert.strictEqual(g[1].body.reason, 'goto');
			assert.strictEqual((await top(dc)).line, L.log);
			const back = (await dc.gotoTargetsRequest({ source: { path: SRC }, line: L.body })).body.targets;
			await Promise.all([dc.gotoRequest({ threadId: 1, targetId: back[0].id }), dc.waitForEvent('stopped')]);
			assert.strictEqual(await tickOf(dc), back[0].id);
			assert.strictEqual((await top(dc)).line, L.body);
		});

		it('disassembles one instruction per tick with its source line', async () => {
			await dc.hitBreakpoint({ program: F.model }, { path: SRC, line: L.softmax });
			const frame = await top(dc);
			const d = await dc.disassembleRequest({ memoryReference: frame.instructionPointerReference, instructionOffset: -2, instructionCount: 6 });
			const ins = d.body.instructions;
			assert.strictEqual(ins.length, 6);
			const t = Number(frame.instructionPointerReference);
			assert.deepStrictEqual(ins.map(i => Number(i.address)), [t - 2, t - 1, t, t + 1, t + 2, t + 3]);
			assert.match(ins[2].instruction, /^v\d+ = aten\.linear/);
			assert.strictEqual(ins[2].line, L.softmax);
			assert.strictEqual(ins[2].symbol, 'head.proj');
			const far = await dc.disassembleRequest({ memoryReference: '0', instructionOffset: -1, instructionCount: 1 });
			assert.strictEqual(far.body.instructions[0].presentationHint, 'invalid');
		});

		it('honours conditions and hit conditions, and says why a line cannot break', async () => {
			await Promise.all([
				dc.waitForEvent('initialized').then(async () => {
					const r = await dc.setBreakpointsRequest({ source: { path: SRC }, breakpoints: [
						{ line: L.softmax, hitCondition: '2' }, { line: 3 }, { line: L.body, condition: 'max(x) > 1e9' }] });
					const [a, b, c] = r.body.breakpoints;
					assert.strictEqual(a.verified, true);
					assert.strictEqual(b.verified, false);
					assert.match(b.message, /no instruction of this model comes from line 3/);
					assert.strictEqual(c.verified, true);
					const f = await dc.setFunctionBreakpointsRequest({ breakpoints: [{ name: 'aten.nosuch*' }] });
					assert.strictEqual(f.body.breakpoints[0].verified, false);
					return dc.configurationDoneRequest();
				}),
				dc.launch({ program: F.model }),
			]);
			await dc.assertStoppedLocation('breakpoint', { path: SRC, line: L.softmax });
			// the second hit on that line is the softmax (the linear was the first)
			assert.strictEqual((await top(dc)).name, 'head (aten.softmax.int)');
		});

		it('prints a logpoint\'s message to the debug console and runs through it', async () => {
			const logged = [];
			dc.on('output', e => { if (e.body.category === 'console') logged.push(e.body.output); });
			await Promise.all([
				dc.waitForEvent('initialized').then(async () => {
					const r = await dc.setBreakpointsRequest({ source: { path: SRC }, breakpoints: [
						{ line: L.softmax, logMessage: 'p {max(x)} {{ok}}' }, { line: L.log }] });
					assert.deepStrictEqual(r.body.breakpoints.map(b => b.verified), [true, true]);
					return dc.configurationDoneRequest();
				}),
				dc.launch({ program: F.model }),
			]);
			await dc.assertStoppedLocation('breakpoint', { path: SRC, line: L.log });
			const lines = logged.filter(s => s.startsWith('p '));
			assert.strictEqual(lines.length, 2);          // the line's linear, then its softmax
			assert.match(lines[1], /^p 0\.\d+ \{ok\}\n$/);
		});

		it('stops on a function breakpoint for an op and for a parameter', async () => {
			await start(dc, { program: F.model }, () => dc.setFunctionBreakpointsRequest({ breakpoints: [{ name: 'aten.relu' }, { name: 'param:head.proj.*' }] }));
			assert.match((await top(dc)).name, /aten\.relu/);
			await Promise.all([dc.continueRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			assert.match((await top(dc)).name, /^tick \d+: head\.proj/);   // a parameter load: its disassembly line
		});
	});

	describe('run control', function () {
		it('pauses a long run between two instructions', async () => {
			await Promise.all([
				dc.waitForEvent('initialized').then(() => dc.configurationDoneRequest()),
				dc.launch({ program: F.slow }),
			]);
			await new Promise(r => setTimeout(r, 500));
			const [, stop] = await Promise.all([dc.pauseRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			assert.strictEqual(stop.body.reason, 'pause');
			const t = await tickOf(dc);
			const n = (await dc.sourceRequest({ sourceReference: 1 })).body.content.trimEnd().split('\n').length;
			assert.ok(t > 0 && t < n - 1, `paused at tick ${t} of ${n}`);
			await Promise.all([dc.nextRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			assert.strictEqual(await tickOf(dc), t + 1);
		});

		it('restarts to the first breakpoint again, sets an input before the first tick, and disconnects', async () => {
			await dc.hitBreakpoint({ program: F.model, stopOnEntry: false }, { path: SRC, line: L.body });
			const first = await tickOf(dc);
			await Promise.all([dc.nextRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			await Promise.all([dc.restartRequest({}), dc.waitForEvent('stopped')]);
			assert.strictEqual(await tickOf(dc), first);
			// restart with stopOnEntry, then give the input a value
			await Promise.all([dc.restartRequest({ arguments: { program: F.model, stopOnEntry: true } }), dc.waitForEvent('stopped')]);
			const frame = await top(dc);
			const scope = (await dc.scopesRequest({ frameId: frame.id })).body.scopes.find(s => s.name === 'Inputs');
			const inputs = (await dc.variablesRequest({ variablesReference: scope.variablesReference })).body.variables;
			const set = await dc.setVariableRequest({ variablesReference: scope.variablesReference, name: inputs[0].name, value: '0.5' });
			assert.match(set.body.value, /^f32\[2,6\] min 0\.5 max 0\.5 mean 0\.5/);
			await Promise.all([dc.nextRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			const x = await dc.evaluateRequest({ expression: 'mean(t0)', context: 'watch' });
			assert.strictEqual(Number(x.body.result), 0.5);
			// the adapter ends after disconnect, as DAP asks
			const exited = new Promise(resolve => dc._adapterProcess.on('exit', code => resolve(code)));
			await dc.disconnectRequest({});
			dc.disconnected = true;
			assert.strictEqual(await exited, 0);
		});

		it('answers malformed requests with errors and keeps going', async () => {
			await expectError(dc.customRequest('noSuchRequest', {}), /unsupported request/);
			await expectError(dc.stackTraceRequest({ threadId: 1 }), /launch first/);
			await start(dc, { program: F.model, stopOnEntry: true });
			await expectError(dc.setBreakpointsRequest({ breakpoints: [{ line: 1 }] }), /'source' is required/);
			await expectError(dc.variablesRequest({ variablesReference: 999999 }), /no variables/);
			await expectError(readMemory(dc, { memoryReference: 'garbage', count: 4 }), /unknown memory reference/);
			await expectError(dc.gotoRequest({ threadId: 1, targetId: -5 }), /no target/);
			await expectError(dc.disassembleRequest({ memoryReference: 'x', instructionCount: 1 }), /not a tick/);
			await expectError(dc.setExceptionBreakpointsRequest({ filters: ['bogus'] }), /unknown filter/);
			await Promise.all([dc.nextRequest({ threadId: 1 }), dc.waitForEvent('stopped')]);
			assert.strictEqual(await tickOf(dc), 0);
		});
	});
});

describe('nac dap --port', function () {
	let proc = null;
	// killed here, not in the test: a test that times out never reaches its own `finally`
	afterEach(() => { if (proc) { proc.kill(); proc = null; } });

	it('serves a client over TCP on 127.0.0.1', async () => {
		proc = cp.spawn(NAC, ['dap', '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
		const port = await new Promise((resolve, reject) => {
			let err = '';
			proc.stderr.on('data', d => {
				err += d;
				const m = err.match(/listening on 127\.0\.0\.1:(\d+)/);
				if (m) { resolve(Number(m[1])); }
			});
			proc.on('exit', code => reject(new Error(`nac dap --port exited ${code}: ${err}`)));
		});
		const dc = new DebugClient(NAC, 'dap', 'nac');
		dc.defaultTimeout = 120000;
		await dc.start(port);
		await dc.hitBreakpoint({ program: F.model }, { path: SRC, line: L.log });
		await dc.setBreakpointsRequest({ source: { path: SRC }, breakpoints: [] });
		await Promise.all([dc.continueRequest({ threadId: 1 }), dc.waitForEvent('terminated')]);
		await dc.stop();
	});
});

// The VS Code extension (resources/vscode/extension.js) under a stand-in for the `vscode` module:
// it must start `<nac> dap` for a "nac" debug session and turn F5 on an open .nac into a launch.
'use strict';

const assert = require('assert');
const Module = require('module');
const path = require('path');

const registered = {};
let settingPath = 'nac';
let activeFile = null;
const fakeVscode = {
	DebugAdapterExecutable: class { constructor(command, args) { this.command = command; this.args = args; } },
	commands: { registerCommand: (id, fn) => { registered.commands = { ...(registered.commands || {}), [id]: fn }; return { dispose() {} }; } },
	debug: {
		startDebugging: (folder, config) => { registered.started = [folder, config]; return Promise.resolve(true); },
		registerDebugAdapterDescriptorFactory: (type, f) => { registered.factory = [type, f]; return { dispose() {} }; },
		registerDebugConfigurationProvider: (type, p) => { registered.provider = [type, p]; return { dispose() {} }; },
	},
	workspace: { getWorkspaceFolder: uri => ({ uri, name: 'project' }),
		getConfiguration: section => ({ get: key => (section === 'nac' && key === 'path' ? settingPath : undefined) }) },
	window: {
		get activeTextEditor() { return activeFile ? { document: { fileName: activeFile, uri: 'file://' + activeFile } } : undefined; },
		showErrorMessage: msg => { registered.error = msg; return Promise.resolve(); },
	},
};

describe('the VS Code extension', function () {
	let ext;
	before(() => {
		const load = Module._load;
		Module._load = function (request, ...rest) {
			return request === 'vscode' ? fakeVscode : load.call(this, request, ...rest);
		};
		try {
			ext = require(path.resolve(__dirname, '../../resources/vscode/extension.js'));
		} finally {
			Module._load = load;
		}
		ext.activate({ subscriptions: [] });
	});

	it('starts `nac dap` for a nac session, from the setting or the configuration', () => {
		const [type, factory] = registered.factory;
		assert.strictEqual(type, 'nac');
		settingPath = '/opt/nac-studio/.venv/bin/nac';
		let d = factory.createDebugAdapterDescriptor({ configuration: { program: 'm.nac' } });
		assert.deepStrictEqual([d.command, d.args], ['/opt/nac-studio/.venv/bin/nac', ['dap']]);
		d = factory.createDebugAdapterDescriptor({ configuration: { program: 'm.nac', nacPath: '/x/nac' } });
		assert.strictEqual(d.command, '/x/nac');
	});

	it('debugs the open .nac file on F5 without a launch.json, and asks for a program otherwise', async () => {
		const [, provider] = registered.provider;
		activeFile = '/models/gpt2.nac';
		const c = provider.resolveDebugConfiguration(undefined, {});
		assert.deepStrictEqual([c.type, c.request, c.program], ['nac', 'launch', '/models/gpt2.nac']);
		activeFile = '/models/net.ir';                  // a MIND program: debugged as its NAC
		const ir = provider.resolveDebugConfiguration(undefined, {});
		assert.deepStrictEqual([ir.type, ir.program, ir.name], ['nac', '/models/net.ir', 'Debug net.ir']);
		activeFile = '/src/model.py';
		const none = await provider.resolveDebugConfiguration(undefined, { type: 'nac', request: 'launch', name: 'x' });
		assert.strictEqual(none, undefined);
		assert.match(registered.error, /program/);
		const kept = { type: 'nac', request: 'launch', name: 'x', program: 'a.nac' };
		assert.strictEqual(provider.resolveDebugConfiguration(undefined, kept), kept);
	});

	it('compiles and debugs the open model.py from its command (the editor title\'s run menu)', async () => {
		const run = registered.commands['nac.debugModelFile'];
		activeFile = '/src/model.py';
		await run();
		const [folder, config] = registered.started;
		assert.deepStrictEqual([config.type, config.request, config.program], ['nac', 'launch', '/src/model.py']);
		assert.strictEqual(config.name, 'Compile and debug model.py');
		assert.strictEqual(folder.name, 'project');
		registered.started = null;
		activeFile = '/models/gpt2.nac';
		await run();
		assert.strictEqual(registered.started, null);
		assert.match(registered.error, /model\.py/);
	});
});

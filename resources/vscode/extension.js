// NAC model debugger: VS Code runs `nac dap` (NAC Studio's Debug Adapter Protocol server) for
// every debug session of type "nac". Everything else (breakpoints, stepping, variables) is the
// adapter's; this file only says how to start it.
'use strict';

const vscode = require('vscode');

function nacCommand(configuration) {
	return configuration.nacPath || vscode.workspace.getConfiguration('nac').get('path') || 'nac';
}

class AdapterFactory {
	createDebugAdapterDescriptor(session) {
		return new vscode.DebugAdapterExecutable(nacCommand(session.configuration), ['dap']);
	}
}

class ConfigurationProvider {
	// F5 on an open .nac file (or a MIND .ir program, debugged as its NAC) without a launch.json:
	// debug that file
	resolveDebugConfiguration(folder, config) {
		if (!config.type && !config.request && !config.name) {
			const editor = vscode.window.activeTextEditor;
			const file = editor && editor.document.fileName;
			if (file && (file.endsWith('.nac') || file.endsWith('.ir'))) {
				return { type: 'nac', request: 'launch', name: 'Debug ' + file.split(/[\\/]/).pop(), program: file,
					stopOnEntry: true };
			}
		}
		if (!config.program) {
			return vscode.window.showErrorMessage('NAC: give "program", the .nac file to debug (or your model.py)')
				.then(() => undefined);
		}
		return config;
	}
}

// "NAC: Compile and Debug This Model" on an open model.py: `nac dap` compiles it (nac compile, to
// model.nac beside it) and stops at the breakpoints set in it
function debugModelFile() {
	const editor = vscode.window.activeTextEditor;
	const file = editor && editor.document.fileName;
	if (!file || !file.endsWith('.py')) {
		return vscode.window.showErrorMessage('NAC: open your model.py (its make_model() returns the model) first');
	}
	const folder = vscode.workspace.getWorkspaceFolder ? vscode.workspace.getWorkspaceFolder(editor.document.uri) : undefined;
	return vscode.debug.startDebugging(folder, { type: 'nac', request: 'launch',
		name: 'Compile and debug ' + file.split(/[\\/]/).pop(), program: file });
}

function activate(context) {
	context.subscriptions.push(
		vscode.debug.registerDebugAdapterDescriptorFactory('nac', new AdapterFactory()),
		vscode.debug.registerDebugConfigurationProvider('nac', new ConfigurationProvider()),
		vscode.commands.registerCommand('nac.debugModelFile', debugModelFile));
}

function deactivate() {}

module.exports = { activate, deactivate, AdapterFactory, ConfigurationProvider, debugModelFile };

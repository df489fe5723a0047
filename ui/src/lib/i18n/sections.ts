// Settings saved section by section: one Save per section, which also stores the section's secret.
export const en = {
  unsaved_changes: 'Unsaved changes',
  section_saved: 'Saved and applied',
  key_will_save: 'Saved with this section',
};

export const zh: typeof en = {
  unsaved_changes: '有未保存的更改',
  section_saved: '已保存并生效',
  key_will_save: '随本节一起保存',
};
